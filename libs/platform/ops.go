package platform

import "strings"

// opsPrefixes are the path families served on the operations listener
// (OPS_HTTP_ADDR) when a service has one, beside /metrics: the admin API
// and the service-to-service routes. They are in-cluster only; putting them
// on a port of their own lets the Service behind the Ingress expose the
// public port alone and NetworkPolicies admit each caller to the port it
// needs (charts/svc-lib). A route is placed by its path, so a new admin or
// internal route cannot land on the public port by being forgotten.
var opsPrefixes = [...]string{"/admin/", "/internal/"}

// isOpsRoute reports whether a ServeMux pattern ("[METHOD ][HOST]/PATH")
// belongs on the operations listener.
func isOpsRoute(pattern string) bool {
	p := pattern
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t")
	}
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[i:]
	}
	for _, prefix := range opsPrefixes {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}
