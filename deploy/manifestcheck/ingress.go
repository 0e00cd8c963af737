package main

import (
	"fmt"
	"regexp"
	"regexp/syntax"
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

// useRegexAnnotation is ingress-nginx's switch that makes the Ingress's
// ImplementationSpecific paths regular expressions.
const useRegexAnnotation = "nginx.ingress.kubernetes.io/use-regex"

func useRegex(ing *networkingv1.Ingress) bool { return ing.Annotations[useRegexAnnotation] == "true" }

// publicRegexPrefix is what every regex path must begin with, literally.
const publicRegexPrefix = "/api/"

// regexExposure explains why a regex path (an ImplementationSpecific path
// on an Ingress with use-regex, the chart's <release>-public-regex: the
// local gateway's public Pattern rules) could route a request for an
// in-cluster path, or returns "" when it cannot. nginx anchors the
// expression at the start of the path; an expression whose every match
// begins with the literal /api/ (Go's RE2 reading of it, which for the
// plain classes and anchors these paths use agrees with nginx's PCRE) can
// match neither /admin/ nor /internal/, in any case. Anything else
// (alternation or an optional part before /api/, a syntax RE2 refuses) is
// refused: what cannot be checked is not allowed.
func regexExposure(path string) string {
	re, err := regexp.Compile("^" + path)
	if err != nil {
		return fmt.Sprintf("regex path does not compile: %v", err)
	}
	if prefix := literalPrefix(path); !strings.HasPrefix(prefix, publicRegexPrefix) {
		return fmt.Sprintf("regex path must begin with the literal %s (its literal prefix is %q): it could otherwise match /admin/ or /internal/", publicRegexPrefix, prefix)
	}
	for _, private := range privatePrefixes {
		if re.MatchString(private.prefix + "/v1/x") {
			return private.what
		}
	}
	return ""
}

// literalPrefix is the case-sensitive literal every match of ^path begins
// with ("" when there is none): the parsed expression must be the start of
// the text followed by a literal.
func literalPrefix(path string) string {
	re, err := syntax.Parse("^"+path, syntax.Perl)
	if err != nil {
		return ""
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return ""
	}
	lit := re.Sub[1]
	if lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase != 0 {
		return ""
	}
	return string(lit.Rune)
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
			why := adminExposure(path.Path, path.PathType)
			if path.PathType != nil && *path.PathType == networkingv1.PathTypeImplementationSpecific && useRegex(ing) {
				why = regexExposure(path.Path)
			}
			if why != "" {
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
