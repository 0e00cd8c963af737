package main

import (
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// adminPrefix is the path family that must never be reachable through an
// Ingress: the admin API is in-cluster only.
const adminPrefix = "/admin"

// privatePrefixes are every in-cluster-only path family, with what it is:
// the admin API, and the service-to-service routes (/internal/v1/, such as
// tracking's attribution decisions for commissions).
var privatePrefixes = []struct{ prefix, what string }{
	{adminPrefix, "routes /admin/v1/, which must never be on an Ingress (admin routes are in-cluster only)"},
	{"/internal", "routes /internal/v1/, which must never be on an Ingress (service-to-service routes are in-cluster only)"},
}

// adminExposure explains why an Ingress path could route a request for
// /admin/v1/..., or returns "" when it cannot. The rule matches the render-time
// guard in charts/svc/templates/_helpers.tpl:
//   - only Exact and Prefix are checkable (ImplementationSpecific paths are
//     regular expressions on some controllers);
//   - the path must be absolute and normalised (no "//", "." or ".."
//     segments a proxy may rewrite);
//   - it must not start with /admin (any case);
//   - it must not be a string prefix of /admin/ ("/", "/ad"...), since a
//     Prefix route there matches /admin/v1/... (refused for Exact too, to keep
//     one rule).
func adminExposure(path string, pathType *networkingv1.PathType) string {
	if pathType == nil {
		return "pathType is required"
	}
	switch *pathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
	default:
		return fmt.Sprintf("pathType %s cannot be checked for /admin exposure (use Exact or Prefix)", *pathType)
	}
	p := strings.ToLower(path)
	if !strings.HasPrefix(p, "/") {
		return "path must be absolute"
	}
	for _, seg := range strings.Split(p, "/")[1:] {
		if seg == "." || seg == ".." {
			return "path must be normalised (no . or .. segments)"
		}
	}
	if strings.Contains(p, "//") {
		return "path must be normalised (no empty segments)"
	}
	for _, private := range privatePrefixes {
		if strings.HasPrefix(p, private.prefix) || strings.HasPrefix(private.prefix+"/", p) {
			return private.what
		}
	}
	return ""
}

// checkIngress runs the Ingress-only checks; services maps Service names to
// their port names and numbers for the backend check, which is skipped for
// missing Services when servicesComplete is false (a Service failed to decode
// and was already reported).
func checkIngress(o object, ing *networkingv1.Ingress, services map[string]servicePorts, servicesComplete bool) []Problem {
	var problems []Problem
	add := func(format string, args ...any) {
		problems = append(problems, Problem{Doc: o.doc, Ref: o.ref(), Msg: fmt.Sprintf(format, args...)})
	}
	if ing.Spec.DefaultBackend != nil {
		// A default backend answers every unmatched path, /admin/v1/ included.
		add("spec.defaultBackend is not allowed: it would route /admin/v1/")
	}
	for name, value := range ing.Annotations {
		for _, private := range privatePrefixes {
			if strings.Contains(strings.ToLower(value), private.prefix) {
				add("annotation %s mentions %s: rewrites or snippets could expose in-cluster routes", name, private.prefix)
			}
		}
	}
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for j, path := range rule.HTTP.Paths {
			where := fmt.Sprintf("spec.rules[%d].http.paths[%d] %q", i, j, path.Path)
			if why := adminExposure(path.Path, path.PathType); why != "" {
				add("%s: %s", where, why)
			}
			svc := path.Backend.Service
			if svc == nil {
				add("%s: backend must be a Service", where)
				continue
			}
			ports, ok := services[svc.Name]
			if !ok {
				if servicesComplete {
					add("%s: backend Service %q is not in the input", where, svc.Name)
				}
				continue
			}
			switch {
			case svc.Port.Name != "" && !ports.names[svc.Port.Name]:
				add("%s: Service %q has no port named %q", where, svc.Name, svc.Port.Name)
			case svc.Port.Name == "" && !ports.numbers[svc.Port.Number]:
				add("%s: Service %q has no port %d", where, svc.Name, svc.Port.Number)
			}
		}
	}
	return problems
}
