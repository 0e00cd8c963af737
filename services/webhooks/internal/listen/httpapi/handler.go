// Package httpapi is the HTTP transport of `svc listen`'s routes: a
// program API key of the program (the replica's keys), or a session token
// of kind cli (libs/auth/session, Ed25519, checked against the replica's
// revocations and suspensions), in the platform envelope, as the console's
// webhook routes answer. Accounts' CLI login token (svc_cli_…) is opaque,
// kept hashed in accounts' schema only: Config.OpaqueLogins asks accounts
// about it; without one it is answered 401 with MsgOpaqueLogin.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/webhooks/internal/apierr"
	"github.com/svc-dev/svc/services/webhooks/internal/listen"
	"github.com/svc-dev/svc/services/webhooks/internal/listen/endpoints"
)

// 401 messages.
const (
	MsgMissing      = "Missing or malformed Authorization header. Expected: Bearer <login token or program API key>"
	MsgInvalidLogin = `Invalid login token. Run "svc login" and try again.`
	MsgExpiredLogin = `Login expired. Run "svc login" and try again.`
	MsgInvalidKey   = "Invalid API key"
	MsgRetiredKey   = "This API key is past its rotation deadline; use the program's new key"
	// MsgOpaqueLogin answers accounts' opaque login token (svc_cli_…):
	// only accounts can look it up (its hash is in accounts' schema, and
	// the catalog does not carry login tokens), so webhooks cannot tell
	// whose it is.
	MsgOpaqueLogin = `This server cannot check "svc login" tokens yet; use the program's API key (SVC_API_KEY or "svc config set api-key")`
)

// OpaqueLoginPrefix starts accounts' opaque CLI login tokens.
const OpaqueLoginPrefix = "svc_cli_"

// OpaqueVerifier returns the user of an opaque login token, or
// ErrOpaqueUnknown when it is not a live one.
type OpaqueVerifier interface {
	Verify(ctx context.Context, token string) (int64, error)
}

// ErrOpaqueUnknown is what an OpaqueVerifier returns for a token it
// refuses (the wiring maps the client's sentinel onto it).
var ErrOpaqueUnknown = errors.New("login token not valid")

// Config carries what the transport needs.
type Config struct {
	// Logins checks CLI login tokens, revocations included; nil (no
	// SESSION_PUBLIC_KEY) refuses every login token.
	Logins *session.Checker
	// OpaqueLogins asks accounts about its opaque login tokens (svc_cli_…);
	// nil (no ACCOUNTS_URL or INTERNAL_TOKEN) answers them MsgOpaqueLogin.
	OpaqueLogins OpaqueVerifier
	// Keys authenticates program API keys.
	Keys   *apikey.Authenticator
	Logger *slog.Logger
	// Limit is every route's limit, per token.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the credential check: a client IP whose 401s used
	// up its allowance is refused 429 before the token is checked.
	FailedAuth func(http.Handler) http.Handler
}

// Paths of the routes. The poll is …/listen/{listenerId}/events, not
// …/listen/{listenerId}: a GET of that shape would collide in
// net/http's mux with the console's GET …/webhooks/{webhookId}/deliveries
// (both match …/webhooks/listen/deliveries, neither more specific).
const (
	pathStart = "/api/v1/programs/{id}/webhooks/listen"
	pathOne   = "/api/v1/programs/{id}/webhooks/listen/{listenerId}"
	pathPoll  = "/api/v1/programs/{id}/webhooks/listen/{listenerId}/events"
)

// maxBody bounds a body (the public routes' 64 KiB).
const maxBody = 64 << 10

// Routes lists `svc listen`'s routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	limited := cfg.Limit != nil
	route := func(method, path, name, fail string, e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc, status int) httpkit.Route {
		enc := apierr.Encoder{Logger: logger, Fail: fail, Log: "webhooks listen request failed"}
		var h http.Handler = kithttp.NewServer(e, dec, encodeResponse(status, enc), httpkit.ServerOptions(enc.Encode, logger)...)
		if cfg.Limit != nil {
			h = cfg.Limit(h)
		}
		h = authenticate(cfg, enc, h)
		if cfg.FailedAuth != nil {
			h = cfg.FailedAuth(h)
		}
		return httpkit.Route{Pattern: method + " " + path, Name: name, Handler: h, LimitChecksURL: limited}
	}
	return []httpkit.Route{
		route("POST", pathStart, "webhooks_listen_start", "Failed to start the listener", set.Start, decodeStart, http.StatusCreated),
		route("GET", pathPoll, "webhooks_listen_poll", "Failed to read the listener's events", set.Poll, decodePoll, http.StatusOK),
		route("DELETE", pathOne, "webhooks_listen_stop", "Failed to stop the listener", set.Stop, decodeStop, http.StatusNoContent),
	}
}

type callerKey struct{}

func callerOf(ctx context.Context) listen.Caller {
	c, _ := ctx.Value(callerKey{}).(listen.Caller)
	return c
}

// authenticate admits a CLI login token (signed out and suspended users
// refused) or a working program API key; a dashboard session is refused
// like any other invalid token. A failed lookup is the route's 500.
func authenticate(cfg Config, enc apierr.Encoder, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		token, res := apikey.ParseBearer(header)
		switch res {
		case apikey.ParseMissing:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgMissing)
			return
		case apikey.ParseEmpty:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgMissing)
			return
		}
		var caller listen.Caller
		if strings.HasPrefix(token, OpaqueLoginPrefix) {
			if cfg.OpaqueLogins == nil {
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgOpaqueLogin)
				return
			}
			uid, err := cfg.OpaqueLogins.Verify(r.Context(), token)
			switch {
			case errors.Is(err, ErrOpaqueUnknown):
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidLogin)
				return
			case err != nil:
				enc.Encode(r.Context(), err, w)
				return
			}
			caller.UserID = uid
		} else if strings.HasPrefix(token, apikey.LivePrefix) || strings.HasPrefix(token, apikey.TestPrefix) {
			if cfg.Keys == nil {
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidKey)
				return
			}
			key, outcome, err := cfg.Keys.AuthenticateHeader(r.Context(), header)
			switch {
			case err != nil:
				enc.Encode(r.Context(), err, w)
				return
			case outcome == apikey.OutcomeRetired:
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgRetiredKey)
				return
			case !outcome.Authenticated():
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidKey)
				return
			}
			caller.KeyProgramID = key.ProgramID
		} else {
			if cfg.Logins == nil {
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidLogin)
				return
			}
			claims, err := cfg.Logins.Check(r.Context(), token)
			switch {
			case errors.Is(err, session.ErrExpired):
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgExpiredLogin)
				return
			case errors.Is(err, session.ErrInvalidToken):
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidLogin)
				return
			case err != nil:
				enc.Encode(r.Context(), err, w)
				return
			}
			caller.UserID = claims.UserID
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, caller)))
	})
}

// target reads the caller and the path's ids; an id that is not a
// positive whole number is the request's refusal, reported after the
// access check (a program id's before it).
func target(ctx context.Context, r *http.Request, withListener bool) endpoints.Target {
	t := endpoints.Target{Caller: callerOf(ctx), ProgramID: httpkit.PathID(r, "id")}
	if withListener {
		t.ListenerID = httpkit.PathID(r, "listenerId")
		if t.ListenerID == 0 {
			t.Err = listen.ErrBadListenerID
		}
	}
	return t
}

// decodeStart reads {events?, include_test?}; a null is leaving it out.
func decodeStart(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.StartRequest{Target: target(ctx, r, false)}
	req.Err = func() error {
		if _, err := httpkit.Query(r); err != nil {
			return err
		}
		obj, err := httpkit.DecodeKnownObject(r, maxBody, true, "events", "include_test")
		if err != nil {
			return err
		}
		ev, ok, err := obj.StringSlice("events")
		if err != nil {
			return &httpkit.FieldError{Field: "events", Msg: "events must be an array of event type strings"}
		}
		if ok {
			if ev == nil {
				ev = []string{}
			}
			req.Input.Events = ev
		}
		it, ok, err := obj.Bool("include_test")
		if err != nil {
			return err
		}
		if ok {
			req.Input.IncludeTest = &it
		}
		return nil
	}()
	return req, nil
}

// decodePoll reads ?after=<seq>&wait=<seconds>.
func decodePoll(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.PollRequest{Target: target(ctx, r, true)}
	if req.Err != nil {
		return req, nil
	}
	req.Err = func() error {
		q, err := httpkit.Query(r, "after", "wait")
		if err != nil {
			return err
		}
		v, ok := q["after"]
		if !ok {
			return listen.ErrAfterRequired
		}
		if req.After, err = strconv.ParseInt(v, 10, 64); err != nil || req.After < 0 || v[0] == '+' {
			return listen.ErrBadAfter
		}
		if v, ok := q["wait"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > listen.MaxWait || v[0] == '+' {
				return listen.ErrBadWait
			}
			req.Wait = time.Duration(n) * time.Second
		}
		return nil
	}()
	return req, nil
}

func decodeStop(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.StopRequest{Target: target(ctx, r, true)}
	if req.Err != nil {
		return req, nil
	}
	if _, err := httpkit.Query(r); err != nil {
		req.Err = err
		return req, nil
	}
	_, req.Err = httpkit.DecodeKnownObject(r, maxBody, true)
	return req, nil
}

type envelope struct {
	Data any `json:"data"`
}

// page is the poll's answer: the events and the next poll's after.
type page struct {
	Data  any   `json:"data"`
	After int64 `json:"after"`
}

func encodeResponse(status int, enc apierr.Encoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		r := resp.(endpoints.Response)
		if r.Err != nil {
			enc.Encode(ctx, r.Err, w)
			return nil
		}
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return nil
		}
		if r.After != nil {
			return httpkit.WriteJSON(w, status, page{Data: r.Data, After: *r.After})
		}
		return httpkit.WriteJSON(w, status, envelope{Data: r.Data})
	}
}
