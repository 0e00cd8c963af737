package httpapi

import (
	"context"
	"errors"
	"html/template"
	"mime"
	"net/http"
	"strings"

	"github.com/svc-dev/svc/services/accounts/internal/dashauth"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// notInvitedPage is what a browser gets when the provider's form post
// finishes the sign-in of a person no user has, on a server that signs up
// invited people only (SIGNUP=invite): the callback is a top-level
// navigation, so a JSON envelope would be all the person sees. A client
// that asks for JSON gets the envelope (403, details.code
// SIGNUP_INVITE_ONLY).
var notInvitedPage = template.Must(template.New("not-invited").Parse(`<!doctype html>
<html lang="en">
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Ask for an invitation</title>
<main>
<h1>Ask for an invitation</h1>
<p data-testid="not-invited">{{.Message}}</p>
<p>Signed in with the wrong account at your provider? <a href="{{.Dashboard}}">Sign in again</a>.</p>
</main>
`))

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

// writeNotInvited writes the page when err is the invite-only refusal and
// the browser asked for a page; false when it wrote nothing.
func writeNotInvited(_ context.Context, w http.ResponseWriter, r *http.Request, err error) bool {
	if !errors.Is(err, identity.ErrNotInvited) || !wantsPage(r) {
		return false
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusForbidden)
	_ = notInvitedPage.Execute(w, struct{ Message, Dashboard string }{identity.ErrNotInvited.Message, dashauth.DashboardPrefix})
	return true
}
