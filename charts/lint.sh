#!/usr/bin/env bash
# charts/lint.sh: check every chart in this directory.
#
#   charts/lint.sh        build dependencies, then for each chart: helm lint
#                         --strict and helm template with each ci/*.yaml,
#                         the output checked by deploy/manifestcheck; then
#                         prove both /admin guards, the in-cluster rules
#                         (operations port, NetworkPolicies, TRUSTED_PROXIES,
#                         token lengths), the CATALOG_CONSUMERS check and
#                         the image names check (charts, production
#                         example, make image-refs, skaffold.yaml) and the
#                         charts README's table check fire. (make
#                         helm-lint; make test runs it through
#                         deploy/manifestcheck's TestChartsLint)
#   charts/lint.sh deps   only build the file:// dependencies, bottom-up
#                         (skaffold runs this before deploying).
#
# Needs helm (installed with `go install` when missing) and Go.
# A ci values file may carry header lines read by this script:
#   # manifestcheck-expect: Kind=N,...   exact object counts of the render
#   # helm-args: --api-versions ...      extra `helm template` arguments
#   # extra-values: values-local.yaml    values files (relative to the chart)
#                                        applied before the ci file
set -euo pipefail

charts_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root_dir="$(dirname "$charts_dir")"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
RELEASE=svc
NAMESPACE=svc

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'lint.sh: %s\n' "$*" >&2; exit 1; }

find_helm() {
  if command -v helm >/dev/null 2>&1; then
    command -v helm
    return
  fi
  local gobin
  gobin="$(go env GOBIN)"
  gobin="${gobin:-$(go env GOPATH)/bin}"
  if [[ ! -x "$gobin/helm" ]]; then
    log "helm not found: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (about a minute)"
    (cd "$root_dir" && GOWORK=off GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
  fi
  echo "$gobin/helm"
}

# Charts in dependency order: libraries, then service charts, then the
# umbrella (the only chart depending on service charts).
ordered_charts() {
  local libs=() services=() umbrellas=() dir name
  for dir in "$charts_dir"/*/; do
    dir="${dir%/}"
    [[ -f "$dir/Chart.yaml" ]] || continue
    name="$(basename "$dir")"
    if grep -qE '^type:[[:space:]]*library' "$dir/Chart.yaml"; then
      libs+=("$name")
    elif grep -qE 'repository:[[:space:]]*file://\.\./' "$dir/Chart.yaml" \
      && grep -E 'repository:[[:space:]]*file://\.\./' "$dir/Chart.yaml" | grep -vq 'svc-lib'; then
      umbrellas+=("$name")
    else
      services+=("$name")
    fi
  done
  printf '%s\n' "${libs[@]}" "${services[@]}" "${umbrellas[@]}"
}

is_library() { grep -qE '^type:[[:space:]]*library' "$charts_dir/$1/Chart.yaml"; }

build_deps() {
  local chart
  for chart in $(ordered_charts); do
    if grep -q '^dependencies:' "$charts_dir/$chart/Chart.yaml"; then
      log "helm dependency build $chart"
      # Chart.lock is build output (.gitignore): a lock left from before a
      # dependency was added (commissions) would make the build refuse to
      # run; without one, `helm dependency build` resolves Chart.yaml afresh.
      rm -f "$charts_dir/$chart/Chart.lock"
      "$HELM" dependency build "$charts_dir/$chart" >/dev/null
    fi
  done
}

header() { # header <file> <name>: value of a "# <name>: value" line
  sed -n "s/^# $2:[[:space:]]*//p" "$1" | head -n1
}

HELM="$(find_helm)"
build_deps
[[ "${1:-}" == "deps" ]] && exit 0
[[ $# -eq 0 ]] || die "unknown argument $1 (use: lint.sh [deps])"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

log "build deploy/manifestcheck"
(cd "$root_dir/deploy/manifestcheck" && GOWORK=off go build -o "$tmp/manifestcheck" .)
check="$tmp/manifestcheck"

for chart in $(ordered_charts); do
  dir="$charts_dir/$chart"
  if is_library "$chart"; then
    log "helm lint --strict $chart (library)"
    "$HELM" lint --strict "$dir" >"$tmp/lint.out" 2>&1 || { cat "$tmp/lint.out" >&2; die "helm lint $chart failed"; }
    continue
  fi
  shopt -s nullglob
  values=("$dir"/ci/*.yaml)
  shopt -u nullglob
  [[ ${#values[@]} -gt 0 ]] || die "$chart has no ci/*.yaml values file to render with"
  for v in "${values[@]}"; do
    name="$chart/ci/$(basename "$v")"
    files=()
    for f in $(header "$v" extra-values); do
      files+=(-f "$dir/$f")
    done
    files+=(-f "$v")
    log "helm lint --strict $name"
    "$HELM" lint --strict "$dir" "${files[@]}" >"$tmp/lint.out" 2>&1 || { cat "$tmp/lint.out" >&2; die "helm lint $name failed"; }

    read -r -a extra <<<"$(header "$v" helm-args)"
    expect="$(header "$v" manifestcheck-expect)"
    log "helm template $name ${extra[*]:+${extra[*]} }| manifestcheck -expect ${expect:-(none)}"
    "$HELM" template "$RELEASE" "$dir" --namespace "$NAMESPACE" "${files[@]}" "${extra[@]}" >"$tmp/render.yaml" \
      || die "helm template $name failed"
    "$check" -expect "$expect" <"$tmp/render.yaml" || die "manifestcheck failed on $name"
  done
done

# The admin guards must fire, not just exist: first at render time (the
# umbrella refuses the route), then on a rendered Ingress altered after the
# fact (manifestcheck refuses it).
umbrella_values="$charts_dir/svc/ci/default-values.yaml"
for path in /admin/v1 /Admin /adm /; do
  log "expect the umbrella to refuse an ingress route on $path"
  if "$HELM" template "$RELEASE" "$charts_dir/svc" -f "$umbrella_values" \
      --set "ingress.routes[0].path=$path,ingress.routes[0].pathType=Prefix,ingress.routes[0].service=accounts" \
      >/dev/null 2>"$tmp/err"; then
    die "a route on $path rendered: the /admin guard in charts/svc is broken"
  fi
  grep -q 'would expose /admin/v1/' "$tmp/err" || { cat "$tmp/err" >&2; die "route on $path failed for another reason"; }
done

# The regex Ingress's guards: a regex route must begin with the literal
# /api/ at render time, and manifestcheck refuses a rendered regex path
# that could match /admin/.
for path in '/.*' '/admin/v1/.*' '/(api|admin)/x' '/ap.*'; do
  log "expect the umbrella to refuse the regex route $path"
  if "$HELM" template "$RELEASE" "$charts_dir/svc" -f "$umbrella_values" \
      --set-string "ingress.regexRoutes[0].path=$path" --set "ingress.regexRoutes[0].service=accounts" >/dev/null 2>"$tmp/err"; then
    die "a regex route on $path rendered: the guard in charts/svc is broken"
  fi
  grep -q 'must start with the literal /api/' "$tmp/err" || { cat "$tmp/err" >&2; die "regex route $path failed for another reason"; }
done
log "expect manifestcheck to refuse a rendered regex Ingress path that could reach /admin"
"$HELM" template "$RELEASE" "$charts_dir/svc" -f "$umbrella_values" \
  | sed 's#path: "/api/v1/programs/\[^/\]+/commissions\$"#path: "/.*/v1/x"#' >"$tmp/regex.yaml"
grep -q 'path: "/\.\*/v1/x"' "$tmp/regex.yaml" || die "could not plant a wide regex path in the render"
if "$check" <"$tmp/regex.yaml" >/dev/null 2>"$tmp/err"; then
  die "manifestcheck accepted a regex path that could match /admin/"
fi
grep -q 'regex path must begin with the literal /api/' "$tmp/err" || { cat "$tmp/err" >&2; die "manifestcheck refused the wide regex for another reason"; }

log "expect manifestcheck to refuse a rendered Ingress routing /admin/v1"
"$HELM" template "$RELEASE" "$charts_dir/svc" -f "$umbrella_values" \
  | sed 's#path: /api/v1/cli$#path: /admin/v1#' >"$tmp/admin.yaml"
grep -q 'path: /admin/v1$' "$tmp/admin.yaml" || die "could not plant an /admin path in the render"
if "$check" <"$tmp/admin.yaml" >/dev/null 2>"$tmp/err"; then
  die "manifestcheck accepted an Ingress routing /admin/v1"
fi
grep -q 'routes /admin/v1/' "$tmp/err" || { cat "$tmp/err" >&2; die "manifestcheck failed for another reason"; }

# The in-cluster rules (issue 23) must fire too: manifestcheck refuses each
# of these renders, altered at render time or after, for the reason named.
refused() { # refused <what> <message manifestcheck must print> <file
  if "$check" >/dev/null 2>"$tmp/err"; then
    die "manifestcheck accepted $1"
  fi
  grep -qF "$2" "$tmp/err" || { cat "$tmp/err" >&2; die "manifestcheck refused $1 for another reason"; }
}
render() { "$HELM" template "$RELEASE" "$charts_dir/svc" --namespace "$NAMESPACE" -f "$umbrella_values" "$@"; }
render >"$tmp/default.yaml"

# TRUSTED_PROXIES trusts nothing unless set: no chart's default render sets it.
for chart in accounts tracking commissions analytics webhooks svc; do
  log "expect $chart's default render to trust no proxy (no TRUSTED_PROXIES)"
  "$HELM" template "$RELEASE" "$charts_dir/$chart" -f "$charts_dir/$chart/ci/default-values.yaml" >"$tmp/chart.yaml"
  if grep -q 'name: TRUSTED_PROXIES' "$tmp/chart.yaml"; then
    die "$chart's default render sets TRUSTED_PROXIES: the chart default must trust nothing"
  fi
done

log "expect manifestcheck to refuse a public Service leading to the operations port"
sed 's#targetPort: http$#targetPort: ops#' "$tmp/default.yaml" >"$tmp/bad.yaml"
refused "a public Service on the operations port" "which the Ingress routes to, exposes the operations port" <"$tmp/bad.yaml"

log "expect manifestcheck to refuse services without OPS_HTTP_ADDR"
sed '/name: OPS_HTTP_ADDR/,+1d' "$tmp/default.yaml" >"$tmp/bad.yaml"
refused "services without OPS_HTTP_ADDR" "HTTP_ADDR without OPS_HTTP_ADDR" <"$tmp/bad.yaml"

log "expect manifestcheck to refuse a release without NetworkPolicies"
render --set global.networkPolicy.enabled=false >"$tmp/bad.yaml"
refused "a release without NetworkPolicies" "no NetworkPolicy with policyTypes Ingress selects its pods" <"$tmp/bad.yaml"

log "expect manifestcheck to refuse operators peered as every namespace"
render --set-json 'global.networkPolicy.operations=[{"namespaceSelector":{}}]' >"$tmp/bad.yaml"
refused "an operations peer of every namespace" "selects every pod of every namespace" <"$tmp/bad.yaml"

log "expect manifestcheck to refuse TRUSTED_PROXIES of a whole private range"
render --set global.trustedProxies=10.0.0.0/8 >"$tmp/bad.yaml"
refused "TRUSTED_PROXIES=10.0.0.0/8" "TRUSTED_PROXIES trusts 10.0.0.0/8" <"$tmp/bad.yaml"

log "expect manifestcheck to refuse a short ADMIN_TOKEN"
"$HELM" template "$RELEASE" "$charts_dir/svc" --namespace "$NAMESPACE" -f "$charts_dir/svc/ci/full-values.yaml" \
  --set accounts.secret.data.ADMIN_TOKEN=short >"$tmp/bad.yaml"
refused "a 5-byte ADMIN_TOKEN" "ADMIN_TOKEN is 5 bytes" <"$tmp/bad.yaml"

log "expect the chart to refuse an operations port equal to the public one"
if render --set accounts.opsPort=8080 >/dev/null 2>"$tmp/err"; then
  die "rendered with accounts.opsPort=8080: the port check in svc-lib is broken"
fi
grep -q 'opsPort must differ from port' "$tmp/err" || { cat "$tmp/err" >&2; die "opsPort=8080 failed for another reason"; }

# accounts' CATALOG_CONSUMERS must name exactly the enabled catalog
# replicas: a disabled one left in the list (the barrier would wait for it)
# and an enabled one left out must both fail the render.
for args in commissions.enabled=false accounts.env.CATALOG_CONSUMERS=tracking; do
  log "expect the umbrella to refuse CATALOG_CONSUMERS not matching the enabled replicas ($args)"
  if "$HELM" template "$RELEASE" "$charts_dir/svc" -f "$umbrella_values" --set "$args" >/dev/null 2>"$tmp/err"; then
    die "rendered with $args: the CATALOG_CONSUMERS check in charts/svc is broken"
  fi
  grep -q 'CATALOG_CONSUMERS lists' "$tmp/err" || { cat "$tmp/err" >&2; die "$args failed for another reason"; }
done

# The Ingress must route exactly like the local gateway
# (deploy/devstack/gateway, owned by the dev stack): same public prefixes, same
# owners. Rendered with every service enabled so all routes appear.
gateway_go="$root_dir/deploy/devstack/gateway/gateway.go"
if [[ -f "$gateway_go" ]]; then
  log "compare the Ingress routes with the local gateway's public rules"
  # Prefix rules are on the first Ingress (<release>-public); public Pattern
  # rules (a "*" is one non-empty segment) on the regex Ingress
  # (<release>-public-regex) as regular expressions: "*" is [^/]+ and the
  # path ends with $ (gateway.IngressRegex; nginx anchors the start). Only
  # /api/ patterns may be public (the gateway's tests, the chart and
  # deploy/manifestcheck refuse others).
  if grep -E '\{Pattern: "[^"]*",.*Public: true' "$gateway_go" | grep -vE '\{Pattern: "/api/' >&2; then
    die "a public Pattern rule in $gateway_go is not under /api/: it cannot be on the regex Ingress"
  fi
  sed -nE 's/.*\{Prefix: "([^"]+)", Service: "([^"]+)", Public: true\}.*/\1 \2/p' "$gateway_go" \
    | sed -E 's#^(/.*[^/])/? #\1 #' | sort -u >"$tmp/gateway.routes"
  [[ -s "$tmp/gateway.routes" ]] || die "no public rule parsed from $gateway_go (format changed?)"
  sed -nE 's/.*\{Pattern: "([^"]+)", Service: "([^"]+)", Public: true\}.*/\1 \2/p' "$gateway_go" \
    | sed -E 's#\*#[^/]+#g; s#^([^ ]+) #\1$ #' | sort -u >"$tmp/gateway.regex"
  "$HELM" template "$RELEASE" "$charts_dir/svc" -f "$umbrella_values" \
      --set commissions.enabled=true,analytics.enabled=true,webhooks.enabled=true --show-only templates/ingress.yaml \
    | awk -v rel="$RELEASE-" '
        /^  name: / { regex = ($2 ~ /-regex$/) }
        /- path:/ { p = $3; gsub(/"/, "", p) }
        /name: / && p { n = $2; sub("^" rel, "", n); print (regex ? "R" : "P"), p, n; p = "" }' >"$tmp/ingress.all"
  sed -n 's/^P //p' "$tmp/ingress.all" | sort -u >"$tmp/ingress.routes"
  sed -n 's/^R //p' "$tmp/ingress.all" | sort -u >"$tmp/ingress.regex"
  diff -u --label gateway-patterns "$tmp/gateway.regex" --label regex-ingress "$tmp/ingress.regex" >&2 \
    || die "the regex Ingress differs from deploy/devstack/gateway's public Pattern rules (see diff above)"
  diff -u --label gateway "$tmp/gateway.routes" --label ingress "$tmp/ingress.routes" >&2 \
    || die "the Ingress routes differ from deploy/devstack/gateway (see diff above)"
  # ...and charts/README.md's table of them names every path (routes and
  # services added later included).
  ingress_table_lists() { # ingress_table_lists <README>: the first path left out on stdout
    sed -n '/^## The public Ingress/,/^## /p' "$1" | grep '^|' >"$tmp/ingress-table"
    local path
    while read -r path _; do
      grep -qF "\`$path\`" "$tmp/ingress-table" || { echo "$path"; return 1; }
    done < <(cat "$tmp/ingress.routes" "$tmp/ingress.regex")
  }
  log "check charts/README.md's Ingress table names every rendered path"
  missing="$(ingress_table_lists "$charts_dir/README.md")" \
    || die "charts/README.md's Ingress table (\"The public Ingress\") leaves out $missing"
  log "expect the Ingress table check to refuse a table without /dashboard"
  grep -v '^| `/dashboard`' "$charts_dir/README.md" >"$tmp/README.md"
  if missing="$(ingress_table_lists "$tmp/README.md")"; then
    die "the Ingress table check accepted a table without /dashboard"
  fi
  [[ "$missing" == /dashboard ]] || die "the Ingress table check refused a table without /dashboard for another reason ($missing)"
else
  log "no deploy/devstack/gateway: route parity not checked"
fi

# The admin calls the umbrella's NOTES tell people to try must be routes of
# accounts (services/accounts/internal/*/httpapi), method included. helm
# template leaves NOTES.txt out, so a copy of the chart renders it as an
# ordinary template.
# Route tables: {Pattern: "GET /admin/v1/...", ...} in each feature's
# httpapi package (before: {"GET /admin/v1/...", ...} in one handler.go).
shopt -s nullglob
handler_files=("$root_dir"/services/accounts/internal/*/httpapi/handler.go)
shopt -u nullglob
handler_go="services/accounts/internal/*/httpapi/handler.go"
if [[ ${#handler_files[@]} -gt 0 ]]; then
  log "check the admin calls in the umbrella's NOTES.txt are routes of accounts"
  cp -R "$charts_dir/svc" "$tmp/notes-chart"
  { echo 'notes: |'; sed 's/^/  /' "$charts_dir/svc/templates/NOTES.txt"; } >"$tmp/notes-chart/templates/notes-check.yaml"
  "$HELM" template "$RELEASE" "$tmp/notes-chart" --namespace "$NAMESPACE" -f "$umbrella_values" \
      --show-only templates/notes-check.yaml >"$tmp/notes.txt" || die "the umbrella's NOTES.txt does not render"
  grep -qE 'port-forward svc/[a-z0-9-]+ ' "$tmp/notes.txt" || die "NOTES.txt no longer shows the kubectl port-forward to accounts"
  # "GET /admin/v1/programs/{id}" -> "^GET /admin/v1/programs/[^/]+$"
  sed -nE 's#.*\{(Pattern:[[:space:]]*)?"([A-Z]+ /admin/v1/[^"]*)".*#\2#p' "${handler_files[@]}" \
    | sed -E 's#\{[^}]*\}#[^/]+#g; s#^#^#; s#$#$#' | sort -u >"$tmp/admin.routes"
  [[ -s "$tmp/admin.routes" ]] || die "no /admin/v1 route parsed from $handler_go (format changed?)"
  url_re='https?://[^/[:space:]]+(/admin/v1/[^[:space:]?"'"'"']*)'
  data_re='[[:space:]](-d|--data[a-z-]*)[[:space:]=]'
  method_re='[[:space:]]-X[[:space:]]*([A-Z]+)'
  calls=0
  # One curl per logical line (backslash continuations joined): -X names
  # the method, else -d/--data makes it POST, else GET.
  while read -r line; do
    [[ "$line" =~ $url_re ]] || continue
    path="${BASH_REMATCH[1]}"
    method=GET
    [[ "$line" =~ $data_re ]] && method=POST
    [[ "$line" =~ $method_re ]] && method="${BASH_REMATCH[1]}"
    grep -qE -f "$tmp/admin.routes" <<<"$method $path" \
      || die "NOTES.txt suggests $method $path, which accounts does not serve ($handler_go)"
    calls=$((calls + 1))
  done < <(sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' "$tmp/notes.txt" | grep -E '(^|[[:space:]])curl[[:space:]]')
  [[ $calls -gt 0 ]] || die "NOTES.txt names no /admin/v1 call to try"
else
  log "no $handler_go: NOTES.txt admin calls not checked"
fi

# The images the charts pull are the ones `make images` builds and pushes
# (<registry>/svc-<service>:<tag>, the tag the umbrella's appVersion): the
# production example's exactly, and with no registry set the umbrella's
# default render (each service chart's appVersion); skaffold.yaml builds the
# same names for the same services. An image renamed in a chart, the example
# or the Makefile, or a tag bumped in one place only, fails here.
images_in() { # images_in <render>: every container image of it, sorted
  sed -nE 's/^[[:space:]]+image: "?([^" ]+)"?[[:space:]]*$/\1/p' "$1" | sort -u
}
images_agree() { # images_agree <what> <render> [make variables]: diff in $tmp/images.diff
  local what="$1" rendered="$2"
  shift 2
  make -s --no-print-directory -C "$root_dir" image-refs "$@" | sort -u >"$tmp/make.images"
  [[ -s "$tmp/make.images" ]] || die "make image-refs printed no image"
  images_in "$rendered" >"$tmp/chart.images"
  diff -u --label "make image-refs $*" "$tmp/make.images" --label "$what" "$tmp/chart.images" >"$tmp/images.diff"
}
prod_values=(-f "$charts_dir/svc/values-production.example.yaml" -f "$charts_dir/svc/ci/production-values.yaml")
render_prod() { "$HELM" template "$RELEASE" "$charts_dir/svc" --namespace "$NAMESPACE" "${prod_values[@]}" "$@"; }
log "compare the images of the production example and the default render with make image-refs"
render_prod >"$tmp/prod.yaml"
images_agree "the production example's images" "$tmp/prod.yaml" \
  || { cat "$tmp/images.diff" >&2; die "the production example's images are not what make images builds (see diff above)"; }
images_agree "the umbrella's default images" "$tmp/default.yaml" REGISTRY= \
  || { cat "$tmp/images.diff" >&2; die "the umbrella's default images are not what make images builds (see diff above)"; }
make -s --no-print-directory -C "$root_dir" image-refs REGISTRY= TAG=t | sed 's/:t$//' | sort -u >"$tmp/make.names"
awk '/^[[:space:]]*- image: /{img=$3} /^[[:space:]]*SERVICE: /{print img; if (img != "svc-" $2) bad=1} END{exit bad}' \
    "$root_dir/skaffold.yaml" | sort -u >"$tmp/skaffold.names" \
  || die "a skaffold.yaml artifact is not named svc-<its SERVICE build-arg>"
diff -u --label "make image-refs" "$tmp/make.names" --label skaffold.yaml "$tmp/skaffold.names" >&2 \
  || die "skaffold.yaml builds other images than make images (see diff above)"
for name in $(cat "$tmp/make.names"); do
  grep -qF "IMAGE_REPO_${name//-/_}}}" "$root_dir/skaffold.yaml" \
    || die "skaffold.yaml sets no image.repository from its $name artifact (setValueTemplates)"
done
# ...and the check fires: a chart image renamed, a tag bumped in the example
# only, images pushed under another registry.
for args in analytics.image.repository=analytics global.image.tag=9.9.9; do
  log "expect the image check to refuse the production example with $args"
  render_prod --set "$args" >"$tmp/bad.yaml"
  if images_agree "the production example with $args" "$tmp/bad.yaml"; then
    die "the image check accepted the production example with $args"
  fi
  grep -qE '^\+.*(/analytics:|:9\.9\.9)' "$tmp/images.diff" || { cat "$tmp/images.diff" >&2; die "the image check refused $args for another reason"; }
done
log "expect the image check to refuse images pushed under another registry"
if images_agree "the production example" "$tmp/prod.yaml" REGISTRY=registry.example.com/other; then
  die "the image check accepted make images REGISTRY=registry.example.com/other"
fi

# charts/README.md's table of charts names every chart here (analytics and
# every service added later).
charts_listed() { # charts_listed <README>: the missing ones in $tmp/missing
  awk '/^\|/{t=1; print; next} t{exit}' "$1" >"$tmp/chart-table"
  : >"$tmp/missing"
  local chart
  for chart in $(ordered_charts); do
    grep -qF "\`$chart\`" "$tmp/chart-table" || echo "$chart" >>"$tmp/missing"
  done
  [[ ! -s "$tmp/missing" ]]
}
log "check charts/README.md's table names every chart"
charts_listed "$charts_dir/README.md" || die "charts/README.md's table of charts leaves out: $(tr '\n' ' ' <"$tmp/missing")"
log "expect the chart table check to refuse a table without analytics"
sed '/^|/s/`analytics`, //; /^|/s/, `analytics`//' "$charts_dir/README.md" >"$tmp/README.md"
if charts_listed "$tmp/README.md"; then
  die "the chart table check accepted a table without analytics"
fi
grep -qx analytics "$tmp/missing" || die "the chart table check refused a table without analytics for another reason"

log "all charts ok"
