#!/usr/bin/env bash
# deploy/check.sh: check the monitoring artefacts.
#   - promtool check rules on prometheus/alerts.yaml;
#   - promtool test rules on prometheus/alerts_test.yaml (each alert fires
#     on a synthetic series, and stays quiet where it should);
#   - grafana/svc-overview.json is valid JSON with unique panel ids, names
#     every metric the services export, and every panel query parses as
#     PromQL (Grafana variables substituted, checked through promtool as
#     recording rules).
# Needs promtool (Debian: apt-get install prometheus) and jq.
# Whether the alerts and panels select the metrics the services really
# export, with their real types and labels, is checked against running
# services by a Go test: (cd deploy/devstack && go test -run 'Alerts|CheckExpr' .).
set -euo pipefail

deploy_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { printf 'check.sh: %s\n' "$*" >&2; exit 1; }
log() { printf '==> %s\n' "$*" >&2; }

command -v promtool >/dev/null || die "promtool not found (Debian/Ubuntu: apt-get install prometheus)"
command -v jq >/dev/null || die "jq not found (apt-get install jq)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

log "promtool check rules prometheus/alerts.yaml"
promtool check rules "$deploy_dir/prometheus/alerts.yaml"

log "promtool test rules prometheus/alerts_test.yaml"
(cd "$deploy_dir/prometheus" && promtool test rules alerts_test.yaml)

dashboard="$deploy_dir/grafana/svc-overview.json"
log "grafana/svc-overview.json"
jq -e . "$dashboard" >/dev/null || die "dashboard is not valid JSON"
dups="$(jq -r '[.panels[].id] | group_by(.) | map(select(length > 1) | .[0]) | .[]' "$dashboard")"
[[ -z "$dups" ]] || die "duplicate panel ids: $dups"
for metric in http_requests_total http_request_duration_seconds_bucket outbox_backlog \
  outbox_oldest_unsent_age_seconds outbox_relay_lag_seconds_bucket outbox_publish_errors_total \
  consumer_lag consumer_apply_errors_total consumer_dead_lettered_total rate_limit_refusals_total \
  webhooks_deliveries_total webhooks_attempts_total webhooks_delivery_lag_seconds_bucket \
  webhooks_pending_deliveries webhooks_endpoint_pending_max webhooks_endpoints_disabled_total; do
  jq -e --arg m "$metric" '[.panels[].targets[]?.expr | select(contains($m))] | length > 0' "$dashboard" >/dev/null \
    || die "no panel queries $metric"
done

# Each query becomes a recording rule so promtool parses it.
{
  echo "groups:"
  echo "  - name: dashboard-queries"
  echo "    rules:"
  jq -r '.panels[].targets[]?.expr' "$dashboard" \
    | sed -e 's/\$__rate_interval/5m/g' -e 's/\$namespace/.*/g' -e 's/\$job/.*/g' \
    | awk '{ gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); printf "      - record: dashboard:query_%d\n        expr: \"%s\"\n", NR, $0 }'
} >"$tmp/queries.yaml"
promtool check rules "$tmp/queries.yaml" >/dev/null || { promtool check rules "$tmp/queries.yaml"; die "a dashboard query does not parse"; }
log "$(jq '[.panels[].targets[]?] | length' "$dashboard") dashboard queries parse"

log "deploy artefacts ok"
