// Package httpapi is the HTTP transport of the command-line account routes
// under /api/v1/cli/: sign-in (auth/start, auth/callback, auth/confirm,
// auth/poll), init,
// programs, and the retired stripe-connect, over the endpoints of
// cliauth/endpoints.
package httpapi

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/httperr"
)

// Config carries what the transport needs besides the endpoints.
type Config struct {
	Service cliauth.Service
	Logger  *slog.Logger
	// Limit wraps the key-less routes (sign-in, stripe-connect): the
	// contract's shared CLI limit, per client IP.
	Limit func(http.Handler) http.Handler
	// TokenLimit is the same limit for the login-token routes (init,
	// programs), per token: it runs once the token has authenticated, so an
	// invalid token gets no bucket, and before the endpoint.
	TokenLimit func(http.Handler) http.Handler
	// FailedAuth wraps the login-token check: a client IP whose 401s used
	// up its allowance is refused 429 before the token is looked up.
	FailedAuth func(http.Handler) http.Handler
}

// loginPrompt ends the 401s of the login-token routes: the contract says
// they are fixed by signing in again.
const loginPrompt = ` Run "svc login" and try again.`

// authMessages words a route's 401s (the contract's init and programs
// messages differ).
type authMessages struct {
	missing, invalid, userNotFound string
}

var (
	initAuth = authMessages{
		missing:      "Authentication required." + loginPrompt,
		invalid:      "Invalid or expired token." + loginPrompt,
		userNotFound: "User not found." + loginPrompt,
	}
	programsAuth = authMessages{
		missing:      "Missing Authorization header." + loginPrompt,
		invalid:      "Invalid or expired token." + loginPrompt,
		userNotFound: "User not found",
	}
)

// MsgStripeConnectGone answers the retired stripe-connect route, naming its
// replacement (Versioning 2).
const MsgStripeConnectGone = "This endpoint has been retired. Connect your payment processor from the dashboard: Settings > Payments (/dashboard/#settings)."

// route describes how one route answers failures.
type route struct {
	name string
	fail string // the contract's 500 message, before "(request_id: …)"
	auth *authMessages
	// page answers a browser that asks for text/html (nil: JSON only).
	page *template.Template
}

// errors is the route's data for the service's one error encoder: the
// contract's 500 message with the request id; on the callback, why an
// id_token was refused is logged for the operator, never sent.
func (rt route) errors(logger *slog.Logger) httperr.Route {
	e := httperr.Route{Fail: rt.fail, RequestID: true, Logger: logger}
	if rt.name == "cli_auth_callback" {
		e.UnauthenticatedLog = "id_token refused"
	}
	return e
}

// Routes lists every CLI route of this group.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	none := func(h http.Handler) http.Handler { return h }
	limit, tokenLimit, failedAuth := cfg.Limit, cfg.TokenLimit, cfg.FailedAuth
	for _, m := range []*func(http.Handler) http.Handler{&limit, &tokenLimit, &failedAuth} {
		if *m == nil {
			*m = none
		}
	}
	server := func(rt route, e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc) http.Handler {
		enc := rt.errors(logger)
		respond := httpkit.NewResponseEncoder(enc.Refusal)
		opts := httpkit.ServerOptions(enc.Failure, logger)
		if rt.page != nil {
			respond = pageEncoder(respond, rt.page)
			opts = append(opts, kithttp.ServerBefore(withAccept))
		}
		// Query values (poll's state) reach the database: refuse NUL first.
		h := http.Handler(kithttp.NewServer(e, httpkit.RefuseNULQuery(dec), respond, opts...))
		if rt.auth == nil {
			return limit(h)
		}
		return failedAuth(requireLogin(cfg.Service, logger, rt, enc, tokenLimit(h)))
	}
	start := route{name: "cli_auth_start", fail: "Failed to start auth session"}
	callback := route{name: "cli_auth_callback", fail: "Auth callback failed", page: landingPage}
	confirm := route{name: "cli_auth_confirm", fail: "Auth confirmation failed", page: confirmedPage}
	poll := route{name: "cli_auth_poll", fail: "Failed to poll auth session"}
	initR := route{name: "cli_init", fail: "Failed to create program", auth: &initAuth}
	programs := route{name: "cli_programs", fail: "Failed to list programs", auth: &programsAuth}
	// A route's limiter refuses a URL that is not UTF-8 after setting its
	// headers (httpkit.DeferURLCheck), when the route has one.
	checks := func(rt route) bool {
		if rt.auth == nil {
			return cfg.Limit != nil
		}
		return cfg.TokenLimit != nil
	}
	return []httpkit.Route{
		{Pattern: "POST /api/v1/cli/auth/start", Name: start.name, Handler: server(start, set.Start, decodeNothing), LimitChecksURL: checks(start)},
		{Pattern: "POST /api/v1/cli/auth/callback", Name: callback.name, Handler: server(callback, set.Callback, decodeCallback), LimitChecksURL: checks(callback)},
		{Pattern: "POST " + endpoints.ConfirmPath, Name: confirm.name, Handler: server(confirm, set.Confirm, decodeConfirm), LimitChecksURL: checks(confirm)},
		{Pattern: "GET /api/v1/cli/auth/poll", Name: poll.name, Handler: server(poll, set.Poll, decodePoll), LimitChecksURL: checks(poll)},
		{Pattern: "POST /api/v1/cli/init", Name: initR.name, Handler: server(initR, set.Init, decodeInit), LimitChecksURL: checks(initR)},
		{Pattern: "GET /api/v1/cli/programs", Name: programs.name, Handler: server(programs, set.Programs, decodePrograms), LimitChecksURL: checks(programs)},
		{Pattern: "POST /api/v1/cli/stripe-connect", Name: "cli_stripe_connect", Handler: limit(http.HandlerFunc(stripeConnectGone)), LimitChecksURL: cfg.Limit != nil},
	}
}

func stripeConnectGone(w http.ResponseWriter, _ *http.Request) {
	_ = httpkit.WritePlatformError(w, http.StatusGone, MsgStripeConnectGone)
}

type userKey struct{}

// requireLogin resolves the Bearer login token before the body is read, so
// an unauthenticated caller learns nothing about validation.
func requireLogin(svc cliauth.Service, logger *slog.Logger, rt route, enc httperr.Route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, res := apikey.ParseBearer(r.Header.Get("Authorization"))
		if res != apikey.ParseOK {
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, rt.auth.missing)
			return
		}
		user, err := svc.Authenticate(r.Context(), token)
		switch {
		case err == nil:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
		case errors.Is(err, cliauth.ErrUserNotFound):
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, rt.auth.userNotFound)
		case errors.Is(err, cliauth.ErrTokenInvalid):
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, rt.auth.invalid)
		default:
			if httperr.Status(err) >= http.StatusInternalServerError {
				logger.ErrorContext(r.Context(), "cli login token lookup failed", "route", rt.name, "err", err)
			}
			enc.Failure(r.Context(), err, w)
		}
	})
}

func userFrom(ctx context.Context) (catalog.User, error) {
	u, ok := ctx.Value(userKey{}).(catalog.User)
	if !ok {
		return catalog.User{}, errors.New("cliauth/httpapi: no authenticated user in context")
	}
	return u, nil
}
