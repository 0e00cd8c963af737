package server

import (
	"fmt"
	"net/http"

	"github.com/svc-dev/svc/api"
	"github.com/svc-dev/svc/libs/platform"
)

// openAPIRoute serves the public API's description (api/openapi.yaml) as
// JSON. Accounts serves it because the Ingress needs one owner for the
// path; the document describes every service's public routes.
func openAPIRoute() (platform.Route, error) {
	doc, err := api.JSON()
	if err != nil {
		return platform.Route{}, fmt.Errorf("openapi document: %w", err)
	}
	return platform.Route{
		Pattern: "GET /api/openapi.json",
		Name:    "openapi",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "public, max-age=300")
			_, _ = w.Write(doc)
		}),
	}, nil
}
