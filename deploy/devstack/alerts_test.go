package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/segmentio/kafka-go"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/seed"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

// Metrics the alerts read that the services do not export: Prometheus' own
// scrape health and kube-state-metrics.
var external = map[string]string{
	"up": "Prometheus (scrape health)",
	"kube_deployment_status_replicas_unavailable": "kube-state-metrics",
	"kube_deployment_status_replicas_available":   "kube-state-metrics",
	"kube_deployment_spec_replicas":               "kube-state-metrics",
}

// Metrics an alert already reads that the services do not export yet. A
// metric listed here is checked like any other as soon as a service
// exports it; while none does, the test logs it instead of failing. Remove
// the entry once it is exported.
var pending = map[string]string{}

// Labels Prometheus adds to every scraped series (target labels of the
// charts' ServiceMonitors), so an alert may match or group on them although
// /metrics does not show them.
var targetLabels = map[string]bool{"namespace": true, "job": true, "instance": true, "pod": true, "service": true, "container": true, "endpoint": true}

// Every alert of deploy/prometheus/alerts.yaml and every dashboard query
// selects metrics the running services really export, with their real types
// and labels: the services are started on a fresh database and broker, made
// to produce every labelled series (HTTP traffic, catalog events published
// and applied, a poison event retried and dead-lettered), and their
// /metrics are parsed.
func TestAlertsSelectExportedMetrics(t *testing.T) {
	t.Parallel()
	st := stacktest.Start(t, map[string]string{"ADMIN_TOKEN": "stack-admin-token-0123456789abcdef", "SETTINGS_RATE_LIMIT": "2", "FAILED_AUTH_RATE_LIMIT": "2"})
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	ctx := context.Background()

	// Traffic: the demo seed publishes catalog events through accounts'
	// outbox, which the replicas apply and acknowledge.
	demo, err := seed.Load("../seed/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := seed.Run(ctx, client(gw.URL), demo)
	if err != nil {
		t.Fatal(err)
	}
	// A webhook delivered: the demo owner's endpoint gets its test ping
	// (webhooks' attempts, deliveries and lag series).
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(receiver.Close)
	var sess struct {
		Token string `json:"token"`
	}
	if err := client(gw.URL).Call(ctx, http.MethodPost, "/admin/v1/sessions", map[string]any{"user_id": res.UserID}, &sess); err != nil {
		t.Fatal(err)
	}
	if err := client(gw.URL).Sync(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	owner := &seed.Client{BaseURL: gw.URL, AdminToken: sess.Token, HTTP: http.DefaultClient}
	var hook struct {
		ID int64 `json:"id"`
	}
	if err := owner.Call(ctx, http.MethodPost, fmt.Sprintf("/api/v1/programs/%d/webhooks", res.ProgramID),
		map[string]any{"url": receiver.URL, "events": []string{"sale.created"}}, &hook); err != nil {
		t.Fatal(err)
	}
	if err := owner.Call(ctx, http.MethodPost, fmt.Sprintf("/api/v1/programs/%d/webhooks/%d/test", res.ProgramID, hook.ID), nil, nil); err != nil {
		t.Fatal(err)
	}
	// A poison catalog event: decodable, but its payload is not a program,
	// so the replicas' handlers fail it MaxAttempts times and dead-letter it.
	poison := &eventsv1.Envelope{Id: uuid.NewString(), Type: eventsv1.TypeProgramUpserted, ProgramId: 1, Payload: []byte{0xff, 0xff, 0xff}}
	b, err := proto.Marshal(poison)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Instance(tracking.Name).Platform().Writer.WriteMessages(ctx, kafka.Message{Topic: eventsv1.TopicCatalog, Key: []byte("1"), Value: b}); err != nil {
		t.Fatal(err)
	}

	// A client over the settings routes' limit of 2 a minute (or over the
	// limit of 2 failed authentications a minute) is refused.
	refused := false
	for range 8 {
		req, err := http.NewRequest(http.MethodGet, gw.URL+"/api/v1/programs/1/settings", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer alerts-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		refused = refused || resp.StatusCode == http.StatusTooManyRequests
	}
	if !refused {
		t.Fatal("no request to the settings routes was refused over their limit")
	}

	want := []string{"rate_limit_refusals_total", "http_requests_total", "http_request_duration_seconds", "outbox_published_total",
		"outbox_relay_lag_seconds", "consumer_lag", "consumer_applied_total", "consumer_apply_errors_total", "consumer_dead_lettered_total",
		"webhooks_deliveries_total", "webhooks_attempts_total", "webhooks_delivery_lag_seconds"}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(60 * time.Second)
	for {
		fams = scrapeAll(t, st.Names(), st.URL)
		missing := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return fams[n] != nil && len(fams[n].Metric) > 0 })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no series yet for %v after the traffic", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}

	for _, q := range append(alertQueries(t), dashboardQueries(t)...) {
		for _, p := range checkExpr(q.expr, fams) {
			t.Errorf("%s: %s", q.name, p)
		}
		for name, why := range pending {
			if fams[name] == nil && strings.Contains(q.expr, name) {
				t.Logf("%s: %s is not exported yet, not checked: %s", q.name, name, why)
			}
		}
	}
}

// The checker itself, on exported metrics of each type: the rows are the
// mistakes it exists to catch, SvcOutboxRelayLagHigh's first form among
// them.
func TestCheckExpr(t *testing.T) {
	t.Parallel()
	fams := map[string]*dto.MetricFamily{
		"outbox_relay_lag_seconds": family("outbox_relay_lag_seconds", dto.MetricType_HISTOGRAM),
		"outbox_backlog":           family("outbox_backlog", dto.MetricType_GAUGE),
		"outbox_published_total":   family("outbox_published_total", dto.MetricType_COUNTER),
		"consumer_lag":             family("consumer_lag", dto.MetricType_GAUGE, "consumer"),
	}
	cases := []struct {
		name, expr string
		wantErr    string
	}{
		{"a histogram selected like a gauge", `max by (job) (outbox_relay_lag_seconds{job="a"}) > 60`, "histogram"},
		{"histogram_quantile over buckets", `histogram_quantile(0.99, sum by (job, le) (rate(outbox_relay_lag_seconds_bucket[5m]))) > 30`, ""},
		{"histogram_quantile over a count", `histogram_quantile(0.99, sum by (job, le) (rate(outbox_relay_lag_seconds_count[5m])))`, "_bucket"},
		{"rate of a counter", `sum(rate(outbox_published_total[5m])) > 0`, ""},
		{"rate of a gauge", `rate(outbox_backlog[5m]) > 0`, "gauge"},
		{"delta of a counter", `delta(outbox_published_total[15m]) > 0`, "counter"},
		{"delta of a gauge", `delta(outbox_backlog[15m]) > 0`, ""},
		{"a suffix on a gauge", `outbox_backlog_count > 0`, "not exported"},
		{"an unknown metric", `outbox_lag > 0`, "not exported"},
		{"an exported label", `consumer_lag{consumer="x", job="y"} > 0`, ""},
		{"an unknown label", `consumer_lag{group="x"} > 0`, "label"},
		{"not PromQL", `max by (job (x)`, "parse"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			probs := checkExpr(tc.expr, fams)
			switch {
			case tc.wantErr == "" && len(probs) > 0:
				t.Fatalf("unexpected problems: %v", probs)
			case tc.wantErr != "" && !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, tc.wantErr) }):
				t.Fatalf("want a problem mentioning %q, got %v", tc.wantErr, probs)
			}
		})
	}
}

func family(name string, typ dto.MetricType, labels ...string) *dto.MetricFamily {
	m := &dto.Metric{}
	for _, l := range labels {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(l), Value: proto.String("v")})
	}
	return &dto.MetricFamily{Name: proto.String(name), Type: typ.Enum(), Metric: []*dto.Metric{m}}
}

// scrapeAll merges the metric families of every service's /metrics (text
// format); a family exported by several services keeps the first's type,
// with the label names of all.
func scrapeAll(t *testing.T, names []string, url func(string) string) map[string]*dto.MetricFamily {
	t.Helper()
	out := map[string]*dto.MetricFamily{}
	for _, name := range names {
		resp, err := http.Get(url(name) + "/metrics")
		if err != nil {
			t.Fatalf("scrape %s: %v", name, err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("parse %s /metrics: %v", name, err)
		}
		for n, f := range fams {
			if prev := out[n]; prev != nil {
				if prev.GetType() != f.GetType() {
					t.Errorf("%s is a %s in one service and a %s in %s", n, prev.GetType(), f.GetType(), name)
				}
				prev.Metric = append(prev.Metric, f.Metric...)
				continue
			}
			out[n] = f
		}
	}
	return out
}

type query struct{ name, expr string }

func alertQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile("../prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var out []query
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out = append(out, query{name: "alert " + r.Alert + r.Record, expr: r.Expr})
		}
	}
	if len(out) == 0 {
		t.Fatal("alerts.yaml has no rules")
	}
	return out
}

// dashboardQueries are the Grafana panels' queries with the dashboard's
// variables replaced as deploy/check.sh does.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile("../grafana/svc-overview.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := yaml.Unmarshal(b, &dash); err != nil { // JSON is YAML
		t.Fatalf("dashboard: %v", err)
	}
	r := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "$job", ".*")
	var out []query
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if tg.Expr != "" {
				out = append(out, query{name: "panel " + p.Title, expr: r.Replace(tg.Expr)})
			}
		}
	}
	return out
}

// Functions over a range of a counter (or of a histogram's parts, which are
// counters) and over a range of a gauge.
var (
	counterFuncs = map[string]bool{"rate": true, "irate": true, "increase": true, "resets": true}
	gaugeFuncs   = map[string]bool{"delta": true, "idelta": true, "deriv": true, "predict_linear": true, "double_exponential_smoothing": true}
)

// checkExpr lists what is wrong with expr against the exported families:
// every selected metric must be exported (a histogram or summary through
// its _bucket, _sum or _count series, never its bare name), counters and
// histogram parts go under rate/increase, gauges under delta/deriv and never
// under rate, histogram_quantile reads _bucket series, and matchers name
// labels the metric has (or target labels Prometheus adds).
func checkExpr(expr string, fams map[string]*dto.MetricFamily) []string {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("parse %q: %v", expr, err)}
	}
	var probs []string
	parser.Inspect(node, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if _, ok := external[name]; ok {
			return nil
		}
		fam, part := resolve(name, fams)
		if fam == nil {
			if _, ok := pending[name]; !ok {
				probs = append(probs, fmt.Sprintf("%s is not exported by any service", name))
			}
			return nil
		}
		typ := fam.GetType()
		isHist := typ == dto.MetricType_HISTOGRAM || typ == dto.MetricType_GAUGE_HISTOGRAM || typ == dto.MetricType_SUMMARY
		if isHist && part == "" {
			probs = append(probs, fmt.Sprintf("%s is a %s: select its _bucket (histogram_quantile), _sum or _count series, not the bare name", name, strings.ToLower(typ.String())))
			return nil
		}
		counterLike := typ == dto.MetricType_COUNTER || part != ""
		fn, inQuantile := enclosing(path)
		switch {
		case counterFuncs[fn] && !counterLike:
			probs = append(probs, fmt.Sprintf("%s(%s): %s is a %s; rate and increase need a counter", fn, name, name, strings.ToLower(typ.String())))
		case gaugeFuncs[fn] && counterLike:
			probs = append(probs, fmt.Sprintf("%s(%s): %s is a counter; use increase or rate", fn, name, name))
		}
		if inQuantile && part != "_bucket" {
			probs = append(probs, fmt.Sprintf("histogram_quantile over %s: it needs a histogram's _bucket series", name))
		}
		have := labelNames(fam)
		if part == "_bucket" {
			have["le"] = true
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel || targetLabels[m.Name] || have[m.Name] {
				continue
			}
			probs = append(probs, fmt.Sprintf("%s has no label %q (it has %v)", name, m.Name, slices.Sorted(maps.Keys(have))))
		}
		return nil
	})
	return probs
}

// resolve finds the family a series name belongs to: itself, or a
// histogram's or summary's _bucket/_sum/_count part.
func resolve(name string, fams map[string]*dto.MetricFamily) (*dto.MetricFamily, string) {
	if f := fams[name]; f != nil {
		return f, ""
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f := fams[base]
		if f == nil {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return f, suffix
		case dto.MetricType_SUMMARY:
			if suffix != "_bucket" {
				return f, suffix
			}
		}
	}
	return nil, ""
}

// enclosing is the function applied directly to a selector (through a range
// or parentheses), and whether histogram_quantile encloses it at any depth.
func enclosing(path []parser.Node) (fn string, inQuantile bool) {
	direct := true
	for i := len(path) - 1; i >= 0; i-- {
		switch p := path[i].(type) {
		case *parser.MatrixSelector, *parser.ParenExpr, *parser.SubqueryExpr:
		case *parser.Call:
			if direct {
				fn, direct = p.Func.Name, false
			}
			if p.Func.Name == "histogram_quantile" {
				inQuantile = true
			}
		default:
			direct = false
		}
	}
	return fn, inQuantile
}

func labelNames(f *dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			out[l.GetName()] = true
		}
	}
	return out
}
