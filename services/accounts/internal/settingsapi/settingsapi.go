// Package settingsapi is the HTTP transport of the program settings routes,
// GET and PATCH /api/v1/programs/{id}/settings, for a signed-in dashboard
// session (the Ed25519 session token accounts issues). go-kit endpoints over
// settings.Service; one error encoder for the group.
package settingsapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/settings"
)

// 401 messages. Rule 5 of the contract: an account-session 401 is fixed by
// signing in again.
const (
	MsgMissingSession = "Missing or malformed Authorization header. Expected: Bearer <session_token>"
	MsgInvalidSession = "Invalid session token. Sign in again."
	MsgExpiredSession = "Session expired. Sign in again."
)

// Route is one settings route, named for metrics.
type Route struct {
	Pattern string
	Name    string
	Handler http.Handler
}

// Config carries what the transport needs.
type Config struct {
	Service  settings.Service
	Sessions *session.Verifier
	Logger   *slog.Logger
	// Limit wraps both routes: the contract's 30 a minute per sign-in token,
	// refused before authentication.
	Limit func(http.Handler) http.Handler
	// Middleware decorates each endpoint (tracing).
	Middleware func(name string) endpoint.Middleware
}

type request struct {
	UserID    int64
	ProgramID int64
	Input     settings.Input
	// BodyErr is a body problem, reported only once access is checked, so
	// a non-member learns nothing from validation.
	BodyErr error
}

type response struct {
	Data any   `json:"data"`
	Err  error `json:"-"`
	seq  catalog.Seq
}

func (r response) Failed() error { return r.Err }

func (r response) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

func view(s settings.Settings) map[string]any {
	return map[string]any{
		"program_id":              s.ProgramID,
		"lead_auth_policy":        s.LeadAuthPolicy,
		"attribution_window_days": s.AttributionWindowDays,
		"payment_tracking_mode":   s.PaymentTrackingMode,
		"allowed_origins":         s.AllowedOrigins,
	}
}

func public(err error) bool {
	var se *settings.Error
	return errors.As(err, &se) || errors.Is(err, catalog.ErrInvalid) || errors.Is(err, httpkit.ErrInvalid) ||
		errors.As(err, new(*httpkit.DecodeError))
}

func answer(data func() any, seq catalog.Seq, err error) (any, error) {
	if err != nil {
		if public(err) {
			return response{Err: err}, nil
		}
		return nil, err
	}
	return response{Data: data(), seq: seq}, nil
}

func makeGet(svc settings.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(request)
		s, err := svc.Get(ctx, r.UserID, r.ProgramID)
		return answer(func() any { return view(s) }, 0, err)
	}
}

func makeUpdate(svc settings.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(request)
		if r.BodyErr != nil {
			// Access first: the same check Get makes.
			if _, err := svc.Get(ctx, r.UserID, r.ProgramID); err != nil {
				return answer(nil, 0, err)
			}
			return response{Err: r.BodyErr}, nil
		}
		s, seq, err := svc.Update(ctx, r.UserID, r.ProgramID, r.Input)
		return answer(func() any { return view(s) }, seq, err)
	}
}

// Routes lists both settings routes.
func Routes(cfg Config) []Route {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	wrap := func(name string, e endpoint.Endpoint) endpoint.Endpoint {
		if cfg.Middleware != nil {
			e = cfg.Middleware(name)(e)
		}
		return e
	}
	limit := cfg.Limit
	if limit == nil {
		limit = func(h http.Handler) http.Handler { return h }
	}
	build := func(name, fail string, e endpoint.Endpoint, dec kithttp.DecodeRequestFunc) http.Handler {
		enc := encodeError(fail)
		srv := kithttp.NewServer(wrap(name, e), dec, httpkit.NewResponseEncoder(enc), httpkit.ServerOptions(enc, logger)...)
		return limit(requireSession(cfg.Sessions, srv))
	}
	return []Route{
		{"GET /api/v1/programs/{id}/settings", "program_settings_get",
			build("program_settings_get", "Failed to load program settings", makeGet(cfg.Service), decodeGet)},
		{"PATCH /api/v1/programs/{id}/settings", "program_settings_update",
			build("program_settings_update", "Failed to update program settings", makeUpdate(cfg.Service), decodeUpdate)},
	}
}

type userKey struct{}

// requireSession verifies the dashboard session token; CLI login tokens and
// program API keys are refused like any other invalid token.
func requireSession(v *session.Verifier, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, res := apikey.ParseBearer(r.Header.Get("Authorization"))
		switch res {
		case apikey.ParseMissing:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgMissingSession)
			return
		case apikey.ParseEmpty:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidSession)
			return
		}
		claims, err := v.VerifyKind(token, session.KindDashboard)
		if errors.Is(err, session.ErrExpired) {
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgExpiredSession)
			return
		}
		if err != nil {
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidSession)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, claims.UserID)))
	})
}

// programID reads the path id; one that is not a positive integer names no
// program the caller can access (403, as for a missing program).
func programID(r *http.Request) int64 {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

func decodeGet(ctx context.Context, r *http.Request) (any, error) {
	uid, _ := ctx.Value(userKey{}).(int64)
	return request{UserID: uid, ProgramID: programID(r)}, nil
}

func decodeUpdate(ctx context.Context, r *http.Request) (any, error) {
	uid, _ := ctx.Value(userKey{}).(int64)
	req := request{UserID: uid, ProgramID: programID(r)}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		req.BodyErr = err
		return req, nil
	}
	req.Input, req.BodyErr = input(obj)
	return req, nil
}

const msgOrigins = "allowed_origins must be a list of origins like https://shop.example.com"

// input reads the settings sent. A value of the wrong JSON type is passed
// on as its raw text, so the catalog refuses it with its own message.
func input(obj httpkit.Object) (settings.Input, error) {
	for _, k := range obj.Keys() {
		known := false
		for _, f := range settings.Fields {
			known = known || k == f
		}
		if !known {
			return settings.Input{}, &catalog.FieldError{Field: k,
				Message: "Unknown setting: " + k + ". Settings are " + strings.Join(settings.Fields, ", ")}
		}
	}
	text := func(key string) *string {
		if v, ok, err := obj.String(key); ok && err == nil {
			return &v
		}
		if raw, ok := obj.Raw(key); ok {
			s := string(raw)
			return &s
		}
		if obj.IsNull(key) {
			s := "null"
			return &s
		}
		return nil
	}
	raw := func(key string) *string {
		if obj.IsNull(key) {
			s := "null"
			return &s
		}
		if v, ok := obj.Raw(key); ok {
			s := string(v)
			return &s
		}
		return nil
	}
	in := settings.Input{
		LeadAuthPolicy:        text("lead_auth_policy"),
		AttributionWindowDays: raw("attribution_window_days"),
		PaymentTrackingMode:   text("payment_tracking_mode"),
	}
	if obj.Has("allowed_origins") {
		// null clears the list, as an empty list does.
		v, ok, err := obj.StringSlice("allowed_origins")
		if err != nil {
			return settings.Input{}, &catalog.FieldError{Field: "allowed_origins", Message: msgOrigins}
		}
		if !ok {
			v = []string{}
		}
		in.AllowedOrigins, in.AllowedOriginsSet = v, true
	}
	return in, nil
}

// encodeError writes the platform envelope: 400 validation, 403 no access,
// 400/413 body problems, and a 500 whose internals stay in the logs.
func encodeError(fail string) kithttp.ErrorEncoder {
	return func(ctx context.Context, err error, w http.ResponseWriter) {
		var (
			se  *settings.Error
			fe  *catalog.FieldError
			de  *httpkit.DecodeError
			hfe *httpkit.FieldError
		)
		switch {
		case errors.As(err, &de):
			_ = httpkit.WritePlatformError(w, de.Status, de.Message)
		case errors.As(err, &fe):
			_ = httpkit.WritePlatformError(w, http.StatusBadRequest, fe.Message)
		case errors.As(err, &hfe):
			_ = httpkit.WritePlatformError(w, http.StatusBadRequest, hfe.Error())
		case errors.As(err, &se) && errors.Is(se, settings.ErrForbidden):
			_ = httpkit.WritePlatformError(w, http.StatusForbidden, se.Message)
		default:
			_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, fail)
		}
	}
}
