package httpapi

import (
	"context"
	"html/template"
	"mime"
	"net/http"
	"strings"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/services/accounts/internal/cliauth/endpoints"
)

// The page the command-line sign-in lands on. A browser that posts the
// provider's answer to auth/callback as a form (Accept: text/html) gets a
// page, not JSON: it shows the session's user code beside a warning, and
// a form that posts the one-time confirm_token to auth/confirm. A script
// (a CLI_LOGIN_REDIRECT_URL page posting JSON) gets the same in JSON and
// shows it itself. Refusals stay JSON envelopes either way.

var landingPage = template.Must(template.New("landing").Parse(`<!doctype html>
<html lang="en">
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Confirm your terminal's sign-in</title>
<main>
<h1>Confirm your terminal's sign-in</h1>
<p>Signed in as <strong>{{.User.Email}}</strong>.</p>
<p>Your terminal should show this code:</p>
<p><strong data-testid="user-code">{{.UserCode}}</strong></p>
<p>Confirm only if you ran <code>svc login</code> yourself and it shows this same code. If someone sent you this link, close this page: confirming would let them act as you.</p>
<form method="post" action="{{.ConfirmURL}}">
<input type="hidden" name="confirm_token" value="{{.ConfirmToken}}">
<button type="submit">The codes match: sign in my terminal</button>
</form>
</main>
`))

var confirmedPage = template.Must(template.New("confirmed").Parse(`<!doctype html>
<html lang="en">
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Signed in</title>
<main>
<h1>Signed in</h1>
<p>Your terminal (code <strong data-testid="user-code">{{.UserCode}}</strong>) is signed in as <strong>{{.User.Email}}</strong>. Return to your terminal to continue; you can close this page.</p>
</main>
`))

type acceptKey struct{}

// withAccept keeps whether the client asked for a page, for the encoder
// (go-kit hands encoders only the context).
func withAccept(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, acceptKey{}, wantsPage(r))
}

// wantsPage reports whether the request is a browser's navigation: its
// Accept names text/html (fetch and API clients send */* or JSON).
func wantsPage(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/html" {
			return true
		}
	}
	return false
}

// pageEncoder answers a page to a browser that asked for one and JSON
// otherwise; refusals are always JSON envelopes (jsonEnc).
func pageEncoder(jsonEnc kithttp.EncodeResponseFunc, page *template.Template) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		asPage, _ := ctx.Value(acceptKey{}).(bool)
		var data any
		switch r := resp.(type) {
		case endpoints.Response[endpoints.CallbackData]:
			if r.Err == nil {
				data = r.Data
			}
		case endpoints.Response[endpoints.ConfirmData]:
			if r.Err == nil {
				data = r.Data
			}
		}
		if !asPage || data == nil {
			return jsonEnc(ctx, w, resp)
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		// The confirm button must not be framed (clickjacking), and the
		// page's one-time value must not be cached or sent anywhere.
		h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		return page.Execute(w, data)
	}
}

// decodeConfirm reads {confirm_token} as JSON, or as the landing page's
// form post.
func decodeConfirm(_ context.Context, r *http.Request) (any, error) {
	v, err := formOrJSON(r, "confirm_token")
	if err != nil {
		return nil, err
	}
	return endpoints.ConfirmRequest{ConfirmToken: v[0]}, nil
}
