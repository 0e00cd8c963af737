package httpkit

import "net/http"

// Route is one HTTP route of a service: every feature's transport returns
// its routes as []Route from Routes(set, cfg), and the platform serves them.
// Name labels the route's metrics and spans.
type Route struct {
	Pattern string // net/http pattern, e.g. "POST /api/v1/track/click"
	Name    string
	Handler http.Handler
}
