{{/*
svc.assertPublicRoute: fails the render when an Ingress route could reach
/admin/v1/ or /internal/v1/. Admin routes are in-cluster only; this is the
first of two guards (the second is deploy/manifestcheck on the rendered
Ingress, which checks /admin only so far).
A route is refused when its path
  - is not absolute, or contains "//", "/./" or "/../" segments that a proxy
    may normalise into something else;
  - starts with /admin (Exact or Prefix);
  - is a string prefix of /admin/ ("/", "/a", "/adm"...): a Prefix route on it
    would match /admin/v1/...;
  - starts with /internal, or is a string prefix of /internal/: service-to-
    service routes (tracking's /internal/v1/attributions) are in-cluster
    only, like admin routes;
and when pathType is not Exact or Prefix (ImplementationSpecific paths are
regular expressions on some controllers and cannot be checked).
*/}}
{{- define "svc.assertPublicRoute" -}}
{{- $path := toString .path -}}
{{- $p := lower $path -}}
{{- if not (has .pathType (list "Exact" "Prefix")) -}}
{{- fail (printf "ingress route %q: pathType must be Exact or Prefix, got %q" $path (toString .pathType)) -}}
{{- end -}}
{{- if not .service -}}
{{- fail (printf "ingress route %q: service is required" $path) -}}
{{- end -}}
{{- if or (not (hasPrefix "/" $p)) (contains "//" $p) (contains "/./" $p) (contains "/../" $p) (hasSuffix "/.." $p) (hasSuffix "/." $p) -}}
{{- fail (printf "ingress route %q: path must be absolute and normalised" $path) -}}
{{- end -}}
{{- if or (hasPrefix "/admin" $p) (hasPrefix $p "/admin/") -}}
{{- fail (printf "ingress route %q would expose /admin/v1/: admin routes are never on the public Ingress (use kubectl port-forward)" $path) -}}
{{- end -}}
{{- if or (hasPrefix "/internal" $p) (hasPrefix $p "/internal/") -}}
{{- fail (printf "ingress route %q would expose /internal/v1/: service-to-service routes are never on the public Ingress" $path) -}}
{{- end -}}
{{- end -}}

{{/*
svc.assertRegexRoute: fails the render unless a regex route (ingress.
regexRoutes) starts with the literal /api/ and names a service: nginx
anchors the expression at the start of the path, so it can only match
paths under /api/ (never /admin/ or /internal/). deploy/manifestcheck
checks the rendered paths again.
*/}}
{{- define "svc.assertRegexRoute" -}}
{{- $path := toString .path -}}
{{- if not (regexMatch "^/api/[A-Za-z0-9_-]" $path) -}}
{{- fail (printf "ingress regex route %q must start with the literal /api/ (it could otherwise match /admin/v1/ or /internal/v1/)" $path) -}}
{{- end -}}
{{- if not .service -}}
{{- fail (printf "ingress regex route %q: service is required" $path) -}}
{{- end -}}
{{- end -}}

{{/* Labels of the dev dependencies; argument: dict "root" . "name" <postgres|kafka>. */}}
{{- define "svc.devSelector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: dev-dependency
{{- end -}}

{{- define "svc.devLabels" -}}
{{ include "svc.devSelector" . }}
app.kubernetes.io/part-of: svc
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/*
svc.assertCatalogConsumers: fails the render when accounts'
CATALOG_CONSUMERS differs from the enabled catalog replicas (the enabled
services whose chart sets catalogReplica: true: tracking, commissions,
analytics, webhooks).
A listed service that is not running never acknowledges on
catalog.applied.v1, so accounts' sync barrier would answer 504; an enabled
replica left out would be skipped by the barrier. Subcharts cannot see each
other's values, so the list cannot be derived inside accounts' chart; the
umbrella, which sees all of them, checks it instead.
*/}}
{{- define "svc.assertCatalogConsumers" -}}
{{- $accounts := .Values.accounts | default dict -}}
{{- if and (kindIs "map" $accounts) $accounts.enabled -}}
{{- $listed := list -}}
{{- range splitList "," (toString (dig "env" "CATALOG_CONSUMERS" "" $accounts)) -}}
{{- if trim . -}}
{{- $listed = append $listed (trim .) -}}
{{- end -}}
{{- end -}}
{{- $replicas := list -}}
{{- range $name, $v := .Values -}}
{{- if and (kindIs "map" $v) $v.enabled $v.catalogReplica -}}
{{- $replicas = append $replicas $name -}}
{{- end -}}
{{- end -}}
{{- $listed = $listed | uniq | sortAlpha -}}
{{- $replicas = $replicas | sortAlpha -}}
{{- if ne (join "," $listed) (join "," $replicas) -}}
{{- fail (printf "accounts.env.CATALOG_CONSUMERS lists %q but the enabled catalog replicas are %q: list exactly the enabled services consuming accounts.catalog.v1 (a listed service that is not running never acknowledges, and accounts' sync barrier answers 504)" (join "," $listed) (join "," $replicas)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
