// Package web holds the browser tracker (svc.js) that tracking serves at
// GET /svc.js, embedded so the binary needs no files beside it.
package web

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/svc-dev/svc/libs/httpkit"
)

// Tracker is svc.js as shipped. Embedded data, the one package-level
// variable the house style allows: it is fixed at build time.
//
//go:embed svc.js
var Tracker []byte

// Handler serves Tracker on GET and HEAD. Brand pages load it on every view,
// so browsers may cache it for five minutes (short, so a fix reaches pages
// quickly) and then revalidate cheaply with the ETag (a hash of the content,
// stable across instances and restarts).
func Handler() http.Handler {
	sum := sha256.Sum256(Tracker)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			_ = httpkit.WritePlatformError(w, http.StatusMethodNotAllowed, "Method not allowed")
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/javascript; charset=utf-8")
		h.Set("Cache-Control", "public, max-age=300")
		h.Set("ETag", etag)
		h.Set("X-Content-Type-Options", "nosniff")
		// ServeContent answers If-None-Match with 304, HEAD without a body
		// and Range requests; a zero modtime leaves Last-Modified out.
		http.ServeContent(w, r, "svc.js", time.Time{}, bytes.NewReader(Tracker))
	})
}
