package cliapi

import (
	"context"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strconv"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
)

// Route is one CLI route, named for metrics.
type Route struct {
	Pattern string
	Name    string
	Handler http.Handler
}

// Config carries what the transport needs besides the endpoints.
type Config struct {
	Service cliauth.Service
	Logger  *slog.Logger
	// Limit wraps every route: the contract's 60 a minute per API key or
	// login token (else per IP), refused before anything else runs.
	Limit func(http.Handler) http.Handler
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
const MsgStripeConnectGone = "This endpoint has been retired. Connect your payment processor from the dashboard: Settings > Payments."

// route describes how one route answers failures.
type route struct {
	name string
	fail string // the contract's 500 message, before "(request_id: …)"
	auth *authMessages
}

// Routes lists every CLI route of this group.
func Routes(set Set, cfg Config) []Route {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	limit := cfg.Limit
	if limit == nil {
		limit = func(h http.Handler) http.Handler { return h }
	}
	server := func(rt route, e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc) http.Handler {
		enc := encodeError(rt, logger)
		h := http.Handler(kithttp.NewServer(e, dec, httpkit.NewResponseEncoder(enc), httpkit.ServerOptions(enc, logger)...))
		if rt.auth != nil {
			h = requireLogin(cfg.Service, logger, rt, enc, h)
		}
		return limit(h)
	}
	start := route{name: "cli_auth_start", fail: "Failed to start auth session"}
	callback := route{name: "cli_auth_callback", fail: "Auth callback failed"}
	poll := route{name: "cli_auth_poll", fail: "Failed to poll auth session"}
	initR := route{name: "cli_init", fail: "Failed to create program", auth: &initAuth}
	programs := route{name: "cli_programs", fail: "Failed to list programs", auth: &programsAuth}
	return []Route{
		{"POST /api/v1/cli/auth/start", start.name, server(start, set.Start, decodeNothing)},
		{"POST /api/v1/cli/auth/callback", callback.name, server(callback, set.Callback, decodeCallback)},
		{"GET /api/v1/cli/auth/poll", poll.name, server(poll, set.Poll, decodePoll)},
		{"POST /api/v1/cli/init", initR.name, server(initR, set.Init, decodeInit)},
		{"GET /api/v1/cli/programs", programs.name, server(programs, set.Programs, decodePrograms)},
		{"POST /api/v1/cli/stripe-connect", "cli_stripe_connect", limit(http.HandlerFunc(stripeConnectGone))},
	}
}

func stripeConnectGone(w http.ResponseWriter, _ *http.Request) {
	_ = httpkit.WritePlatformError(w, http.StatusGone, MsgStripeConnectGone)
}

type userKey struct{}

// requireLogin resolves the Bearer login token before the body is read, so
// an unauthenticated caller learns nothing about validation.
func requireLogin(svc cliauth.Service, logger *slog.Logger, rt route, enc kithttp.ErrorEncoder, next http.Handler) http.Handler {
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
			if _, public := statusOf(err); !public {
				logger.ErrorContext(r.Context(), "cli login token lookup failed", "route", rt.name, "err", err)
			}
			enc(r.Context(), err, w)
		}
	})
}

func userFrom(ctx context.Context) (catalog.User, error) {
	u, ok := ctx.Value(userKey{}).(catalog.User)
	if !ok {
		return catalog.User{}, errors.New("cliapi: no authenticated user in context")
	}
	return u, nil
}

// statusOf is the group's one table from refusal kind to status.
func statusOf(err error) (int, bool) {
	var de *httpkit.DecodeError
	var ce *cliauth.Error
	switch {
	case errors.As(err, &de):
		return de.Status, true
	case errors.Is(err, catalog.ErrInvalid), errors.Is(err, httpkit.ErrInvalid):
		return http.StatusBadRequest, true
	case errors.As(err, &ce):
		switch {
		case errors.Is(ce, cliauth.ErrInvalid):
			return http.StatusBadRequest, true
		case errors.Is(ce, cliauth.ErrUnauthenticated):
			return http.StatusUnauthorized, true
		case errors.Is(ce, cliauth.ErrForbidden):
			return http.StatusForbidden, true
		case errors.Is(ce, cliauth.ErrNotFound):
			return http.StatusNotFound, true
		case errors.Is(ce, cliauth.ErrUnavailable):
			return http.StatusServiceUnavailable, true
		}
	}
	return http.StatusInternalServerError, false
}

// encodeError writes refusals in the platform envelope with the contract's
// message (and details.code for the login refusals), and every other
// failure as the route's 500 with the request id in message and details.
func encodeError(rt route, logger *slog.Logger) kithttp.ErrorEncoder {
	return func(ctx context.Context, err error, w http.ResponseWriter) {
		status, ok := statusOf(err)
		if !ok {
			// Logged by go-kit's error handler (endpoint errors) or by
			// requireLogin; the client gets the request id to quote.
			_ = httpkit.WriteServerErrorWithRequestID(ctx, w, rt.fail)
			return
		}
		var (
			message = err.Error()
			opts    []httpkit.EnvelopeOption
			de      *httpkit.DecodeError
			fe      *catalog.FieldError
			ce      *cliauth.Error
		)
		switch {
		case errors.As(err, &de):
			message = de.Message
		case errors.As(err, &fe):
			message = fe.Message
		case errors.As(err, &ce):
			message = ce.Message
			if ce.Code != "" {
				opts = append(opts, httpkit.WithDetail("code", ce.Code))
			}
		}
		if status == http.StatusUnauthorized && rt.name == "cli_auth_callback" {
			// Why an id_token was refused is for the operator, not the client.
			logger.InfoContext(ctx, "id_token refused", "err", err)
		}
		_ = httpkit.WritePlatformError(w, status, message, opts...)
	}
}

func decodeNothing(context.Context, *http.Request) (any, error) { return struct{}{}, nil }

const formBodyLimit = httpkit.DefaultBodyLimit

// decodeCallback reads {state, id_token} as JSON, or as a form post (a
// sign-in page may submit a plain HTML form). Values that are not strings
// count as missing.
func decodeCallback(_ context.Context, r *http.Request) (any, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
		r.Body = http.MaxBytesReader(nil, r.Body, formBodyLimit)
		if err := r.ParseForm(); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return nil, &httpkit.DecodeError{Status: http.StatusRequestEntityTooLarge, Message: "Request body must not exceed " + itoa(formBodyLimit) + " bytes", Err: err}
			}
			return nil, &httpkit.DecodeError{Status: http.StatusBadRequest, Message: "Request body is not a valid form", Err: err}
		}
		return callbackRequest{State: r.PostForm.Get("state"), IDToken: r.PostForm.Get("id_token")}, nil
	}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, err
	}
	state, _, _ := obj.String("state")
	tok, _, _ := obj.String("id_token")
	return callbackRequest{State: state, IDToken: tok}, nil
}

func decodePoll(_ context.Context, r *http.Request) (any, error) {
	return pollRequest{State: r.URL.Query().Get("state")}, nil
}

func decodeInit(ctx context.Context, r *http.Request) (any, error) {
	user, err := userFrom(ctx)
	if err != nil {
		return nil, err
	}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, err
	}
	// Name and domain that are not strings count as missing; any other
	// commission_type value is named in its own message as sent.
	str := func(key string) *string {
		if v, ok, err := obj.String(key); ok && err == nil {
			return &v
		}
		return nil
	}
	raw := func(key string) *string {
		if v, ok := obj.Raw(key); ok {
			s := string(v)
			return &s
		}
		return nil
	}
	ctype := str("commission_type")
	if ctype == nil {
		ctype = raw("commission_type")
	}
	in := cliauth.InitInput{
		AdvertiserID: raw("advertiser_id"),
		Program: catalog.ProgramInput{
			Name:           str("name"),
			Domain:         str("domain"),
			CommissionType: ctype,
			CommissionRate: raw("commission_rate"),
			DurationMonths: raw("duration_months"),
			CookieDuration: raw("cookie_duration"),
		},
	}
	return initRequest{User: user, Input: in}, nil
}

func decodePrograms(ctx context.Context, _ *http.Request) (any, error) {
	user, err := userFrom(ctx)
	if err != nil {
		return nil, err
	}
	return programsRequest{User: user}, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
