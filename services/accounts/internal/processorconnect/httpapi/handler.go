// Package httpapi is the HTTP transport of the console's payment processor
// connection: POST /api/v1/programs/{id}/processor/connect and DELETE
// /api/v1/programs/{id}/processor for a signed-in dashboard session (a
// program API key is refused like any other invalid session token), and
// GET /api/v1/processor/connect/callback, where the processor sends the
// person's browser back: it answers a redirect to the console's settings,
// or an HTML page saying what went wrong (a browser shows it, not a
// script), never the processor's own text.
package httpapi

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/httperr"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	"github.com/svc-dev/svc/services/accounts/internal/processorconnect/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

// Config carries what the transport needs.
type Config struct {
	// Sessions checks dashboard session tokens, revocations included.
	Sessions *session.Checker
	Logger   *slog.Logger
	// Limit is the connect and disconnect routes' limit (the settings
	// routes' rate per sign-in token), once the token has verified.
	Limit func(http.Handler) http.Handler
	// CallbackLimit is the callback's limit, per client IP (it has no
	// token).
	CallbackLimit func(http.Handler) http.Handler
	// FailedAuth wraps the session check: a client IP whose 401s used up
	// its allowance is refused 429 before the token is verified.
	FailedAuth func(http.Handler) http.Handler
	// SettingsURL is where a connected person lands: the console's
	// settings page (/dashboard/#settings).
	SettingsURL string
}

// Routes lists the connection's routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	build := settingshttpapi.SessionRoutes{Sessions: cfg.Sessions, Logger: cfg.Logger, Limit: cfg.Limit, FailedAuth: cfg.FailedAuth}.Handler
	limited := cfg.Limit != nil
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	page := pageEncoder{settings: cfg.SettingsURL, logger: logger}
	var callback http.Handler = kithttp.NewServer(set.Callback, decodeCallback, page.response,
		kithttp.ServerErrorEncoder(page.failure), kithttp.ServerErrorHandler(httpkit.SlogErrorHandler(logger)))
	if cfg.CallbackLimit != nil {
		callback = cfg.CallbackLimit(callback)
	}
	return []httpkit.Route{
		{Pattern: "POST /api/v1/programs/{id}/processor/connect", Name: "program_processor_connect",
			Handler: build("Failed to start the processor connection", set.Connect, decodeProgram), LimitChecksURL: limited},
		{Pattern: "DELETE /api/v1/programs/{id}/processor", Name: "program_processor_disconnect",
			Handler: build("Failed to disconnect the processor", set.Disconnect, decodeProgram), LimitChecksURL: limited},
		{Pattern: "GET /api/v1/processor/connect/callback", Name: "processor_connect_callback", Handler: callback,
			LimitChecksURL: cfg.CallbackLimit != nil},
	}
}

// decodeProgram reads the path's program id; anything but a positive
// integer is 0, which names no program (403, as for a missing one). The
// routes take no body.
func decodeProgram(ctx context.Context, r *http.Request) (any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		id = 0
	}
	return endpoints.Request{UserID: settingshttpapi.SessionUser(ctx), ProgramID: id}, nil
}

// maxParam bounds code and state: the processor's are tens of characters.
const maxParam = 512

// decodeCallback reads code, state and error, each at most once, UTF-8
// without NUL: anything else is no redirect of the processor's, refused
// before the state is looked at (and before it reaches Postgres).
func decodeCallback(_ context.Context, r *http.Request) (any, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return endpoints.CallbackRequest{BadInput: true}, nil
	}
	var req endpoints.CallbackRequest
	for name, dst := range map[string]*string{"code": &req.Code, "state": &req.State, "error": &req.Error} {
		v, ok := q[name]
		if !ok {
			continue
		}
		if len(v) != 1 || len(v[0]) > maxParam || !utf8.ValidString(v[0]) || strings.ContainsRune(v[0], 0) {
			return endpoints.CallbackRequest{BadInput: true}, nil
		}
		*dst = v[0]
	}
	return req, nil
}

// pageEncoder answers the callback for a browser.
type pageEncoder struct {
	settings string
	logger   *slog.Logger
}

func (p pageEncoder) response(ctx context.Context, w http.ResponseWriter, resp any) error {
	r := resp.(endpoints.CallbackResponse)
	if r.Err != nil {
		p.failure(ctx, r.Err, w)
		return nil
	}
	if r.Seq > 0 {
		w.Header().Set("X-Catalog-Seq", strconv.FormatInt(int64(r.Seq), 10))
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", p.settings)
	w.WriteHeader(http.StatusFound)
	return nil
}

// failure writes the refusal's own message, or the generic one for an
// infrastructure failure (whose cause the error handler logged).
func (p pageEncoder) failure(_ context.Context, err error, w http.ResponseWriter) {
	status, msg := http.StatusInternalServerError, "Something went wrong on our side while connecting the payment processor. Nothing was changed; try again from the dashboard: Settings > Payments."
	var ie *identity.Error
	if errors.As(err, &ie) {
		status, msg = httperr.Status(ie), ie.Message
		if status >= 500 {
			// The processor's failure (its status, never a credential),
			// for the operator; never its text on the page.
			p.logger.Warn("processor connection failed", "err", err)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = errorPage.Execute(w, struct{ Message, Settings string }{msg, p.settings})
}

var errorPage = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Payment processor not connected</title>
<main style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 3rem auto; padding: 0 1rem">
<h1>Payment processor not connected</h1>
<p>{{.Message}}</p>
<p><a href="{{.Settings}}">Back to Settings</a></p>
</main>
</html>
`))
