// Package page serves the brand's console at /dashboard/: one HTML page
// whose hash routes are its pages (#overview, the dashboard as it was;
// #install, #partners, #commissions, #payouts, #webhooks, #settings and #create over
// the console routes of accounts and commissions), its script and style,
// and the vendored charting library (uPlot, pinned, see
// static/vendor/uplot/README.md), all embedded in the binary. No build
// step: the script is plain ES5 a browser runs as served. The page is a
// client of the public API like any other;
// the only thing it learns from the server is where the sign-in and
// program routes are (config.json).
package page

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is the page's path.
const Prefix = "/dashboard/"

// Config tells the page where accounts serves the dashboard sign-in.
type Config struct {
	// SignInURL starts the browser sign-in (return_to is appended).
	SignInURL string `json:"signInURL"`
	// SignOutURL ends the session (POST; "" when there is nothing to end
	// server side).
	SignOutURL string `json:"signOutURL"`
	// ProgramsURL lists the signed-in user and their programs.
	ProgramsURL string `json:"programsURL"`
}

// securityHeaders keep the page to its own origin: scripts and styles
// only from the embedded files (no inline code, no CDN), API calls only
// to the same origin, no framing, and no Referer (the session arrives in
// the URL fragment, which a Referer never carries, but nothing else
// should leak either).
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// Handler serves the page: Prefix is index.html (its path without the
// slash redirects there), Prefix+"config.json" the
// Config, Prefix+"assets/…" the embedded files; anything else under Prefix
// is 404. Only GET and HEAD.
func Handler(cfg Config) (http.Handler, error) {
	files, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	assets := http.StripPrefix(Prefix+"assets/", http.FileServer(http.FS(files)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		securityHeaders(w.Header())
		switch p := r.URL.Path; {
		case p == strings.TrimSuffix(Prefix, "/"):
			// The page's relative asset paths need the slash.
			target := Prefix
			if r.URL.RawQuery != "" {
				target += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, target, http.StatusMovedPermanently)
		case p == Prefix:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			// The page changes with each release; its assets are small.
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(index)
		case p == Prefix+"config.json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(config)
		case strings.HasPrefix(p, Prefix+"assets/") && !strings.HasSuffix(p, "/") && !strings.HasSuffix(p, ".html"):
			w.Header().Set("Cache-Control", "no-cache")
			assets.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}), nil
}
