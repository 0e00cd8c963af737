// Package httpapi is the HTTP transport of the dashboard's browser sign-in
// (/api/v1/dashboard/auth/*) and of the signed-in user's program list
// (/api/v1/dashboard/me), over dashauth/endpoints.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/dashauth"
	"github.com/svc-dev/svc/services/accounts/internal/dashauth/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/httperr"
	sessionsendpoints "github.com/svc-dev/svc/services/accounts/internal/sessions/endpoints"
)

// Paths of the routes.
const (
	PathStart    = "/api/v1/dashboard/auth/start"
	PathCallback = "/api/v1/dashboard/auth/callback"
	PathSignOut  = "/api/v1/dashboard/auth/signout"
	PathMe       = "/api/v1/dashboard/me"
)

// CookieName binds a sign-in to the browser that started it. It holds the
// state, only on the sign-in paths, HttpOnly, for the sign-in's lifetime.
const CookieName = "svc_dashboard_signin"

const cookiePath = "/api/v1/dashboard/auth/"

// Config carries what the transport needs besides the endpoints.
type Config struct {
	// Sessions checks dashboard session tokens, revocations included.
	Sessions *session.Checker
	// SignOut ends the session a sign-out names (sessions/endpoints).
	SignOut endpoint.Endpoint
	Logger  *slog.Logger
	// SessionTTL is the binding cookie's lifetime (the sign-in's).
	SessionTTL time.Duration
	// Limit wraps the sign-in routes (per client IP); TokenLimit the me
	// route, once its session verified; FailedAuth the me route's session
	// check.
	Limit, TokenLimit, FailedAuth func(http.Handler) http.Handler
}

// Routes lists every dashboard route of accounts.
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
	ttl := cfg.SessionTTL
	if ttl <= 0 {
		ttl = dashauth.DefaultSessionTTL
	}
	startEnc := httperr.Route{Fail: "Failed to start sign-in", Logger: logger}
	callbackEnc := httperr.Route{Fail: "Sign-in failed", Logger: logger, UnauthenticatedLog: "dashboard id_token refused"}
	meEnc := httperr.Route{Fail: "Failed to load your programs"}
	opts := func(enc httperr.Route) []kithttp.ServerOption {
		return httpkit.ServerOptions(enc.Failure, logger, kithttp.ServerBefore(withRequest))
	}
	start := kithttp.NewServer(set.Start, httpkit.RefuseNULQuery(decodeStart), encodeStart(startEnc, ttl), opts(startEnc)...)
	callback := kithttp.NewServer(set.Callback, decodeCallback, encodeCallback(callbackEnc), opts(callbackEnc)...)
	me := kithttp.NewServer(set.Me, decodeMe, httpkit.NewResponseEncoder(meEnc.Refusal), opts(meEnc)...)
	signOutEnc := httperr.Route{Fail: "Failed to sign out", Logger: logger}
	signOut := kithttp.NewServer(cfg.SignOut, decodeSignOut, encodeSignOut(logger), opts(signOutEnc)...)
	return []httpkit.Route{
		{Pattern: "GET " + PathStart, Name: "dashboard_auth_start", Handler: limit(start)},
		{Pattern: "POST " + PathCallback, Name: "dashboard_auth_callback", Handler: limit(callback)},
		{Pattern: "POST " + PathSignOut, Name: "dashboard_auth_signout", Handler: limit(signOut)},
		{Pattern: "GET " + PathMe, Name: "dashboard_me", Handler: failedAuth(requireSession(cfg.Sessions, httperr.Route{Fail: meEnc.Fail, Logger: logger, FailureLog: "dashboard session check failed"}, tokenLimit(me)))},
	}
}

func decodeStart(_ context.Context, r *http.Request) (any, error) {
	q := r.URL.Query()
	return endpoints.StartRequest{ReturnTo: q.Get("return_to"), TabNonce: q.Get("tab_nonce")}, nil
}

// secure reports whether the browser reached us over HTTPS (directly, or
// through the ingress, which terminates TLS). A spoofed header can only
// make the cookie stricter.
func secure(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// bindingCookie is the cookie that ties a sign-in to its browser. Over
// HTTPS it is SameSite=None (the provider posts the callback from its own
// site, and a Lax cookie is not sent with a cross-site POST) and Secure;
// over plain HTTP (the local stack, where provider and gateway share the
// 127.0.0.1 site) it is Lax.
func bindingCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	c := &http.Cookie{Name: CookieName, Value: value, Path: cookiePath, MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	if secure(r) {
		c.Secure, c.SameSite = true, http.SameSiteNoneMode
	}
	return c
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, bindingCookie(r, "", -1))
}

func encodeStart(enc httperr.Route, ttl time.Duration) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		r := resp.(endpoints.StartResponse)
		w.Header().Set("Cache-Control", "no-store")
		if r.Err != nil {
			enc.Refusal(ctx, r.Err, w)
			return nil
		}
		req := requestFrom(ctx)
		http.SetCookie(w, bindingCookie(req, r.Started.State, int(ttl/time.Second)))
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Location", r.Started.URL)
		w.WriteHeader(http.StatusFound)
		return nil
	}
}

// decodeCallback reads the provider's form post (response_mode=form_post:
// state and id_token) and the browser's binding cookie.
func decodeCallback(_ context.Context, r *http.Request) (any, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, httpkit.DefaultBodyLimit)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &httpkit.DecodeError{Status: http.StatusRequestEntityTooLarge, Message: "Request body is too large", Err: err}
		}
		return nil, &httpkit.DecodeError{Status: http.StatusBadRequest, Message: "Request body is not a valid form", Err: err}
	}
	if err := httpkit.CheckValuesNUL(r.PostForm); err != nil {
		return nil, err
	}
	req := endpoints.CallbackRequest{State: r.PostForm.Get("state"), IDToken: r.PostForm.Get("id_token")}
	if c, err := r.Cookie(CookieName); err == nil {
		req.BrowserState = c.Value
	}
	return req, nil
}

// encodeCallback sends the browser to its page with the session token in
// the URL fragment: a fragment is never sent to a server, so it is in no
// access log and no Referer; the page takes it out of the address bar at
// once. The tab nonce the page sent to start goes beside it: the page keeps
// a session only when that nonce is the one its tab stored, so a link
// carrying someone else's session (login CSRF) is refused. The binding
// cookie goes in every case (the sign-in is over).
func encodeCallback(enc httperr.Route) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		r := resp.(endpoints.CallbackResponse)
		req := requestFrom(ctx)
		clearCookie(w, req)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if r.Err != nil {
			if !writeNotInvited(ctx, w, req, r.Err) {
				enc.Refusal(ctx, r.Err, w)
			}
			return nil
		}
		frag := "session=" + url.QueryEscape(r.SignedIn.Token) + "&expires_at=" + url.QueryEscape(endpoints.RFC3339(r.SignedIn.ExpiresAt))
		if r.SignedIn.TabNonce != "" {
			frag += "&tab_nonce=" + url.QueryEscape(r.SignedIn.TabNonce)
		}
		w.Header().Set("Location", r.SignedIn.ReturnTo+"#"+frag)
		w.WriteHeader(http.StatusSeeOther)
		return nil
	}
}

// decodeSignOut reads the session the sign-out ends: the Bearer token,
// when there is one. Anything else ends no session.
func decodeSignOut(_ context.Context, r *http.Request) (any, error) {
	token, res := apikey.ParseBearer(r.Header.Get("Authorization"))
	if res != apikey.ParseOK {
		token = ""
	}
	return sessionsendpoints.SignOutRequest{Token: token}, nil
}

// encodeSignOut answers 204 whatever the token was (a sign-out of nothing
// is still signed out) and clears a sign-in in progress (its cookie). The
// session is refused everywhere by the time of the answer, unless a
// replica lagged past the wait: that is logged.
func encodeSignOut(logger *slog.Logger) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		r := resp.(sessionsendpoints.SignOutResponse)
		if r.SignedOut.Lag != nil {
			logger.WarnContext(ctx, "signed-out session not yet applied by every replica", "request_id", httpkit.RequestIDFrom(ctx), "err", r.SignedOut.Lag)
		}
		clearCookie(w, requestFrom(ctx))
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func decodeMe(ctx context.Context, _ *http.Request) (any, error) {
	uid := session.UserID(ctx)
	if uid == 0 {
		return nil, errors.New("dashauth/httpapi: no session user in context")
	}
	return endpoints.MeRequest{UserID: uid}, nil
}

// requireSession is the dashboard session check (session.Require) of an
// answer that must not be cached.
func requireSession(c *session.Checker, enc httperr.Route, next http.Handler) http.Handler {
	h := session.Require(c, enc.Failure, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

type requestKey struct{}

// requestFrom is the request, for encoders that redirect or set cookies
// (go-kit hands encoders only the context).
func requestFrom(ctx context.Context) *http.Request {
	r, _ := ctx.Value(requestKey{}).(*http.Request)
	if r == nil {
		r = &http.Request{Header: http.Header{}}
	}
	return r
}

func withRequest(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}
