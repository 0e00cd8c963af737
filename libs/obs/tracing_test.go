package obs_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/kit/endpoint"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/obs"
)

// collector is an OTLP/HTTP trace receiver good enough for tests.
type collector struct {
	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
	headers  []http.Header
	paths    []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.requests = append(c.requests, &req)
	c.headers = append(c.headers, r.Header.Clone())
	c.paths = append(c.paths, r.URL.Path)
	c.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

type exportedSpan struct {
	name, service string
}

func (c *collector) spans() []exportedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []exportedSpan
	for _, req := range c.requests {
		for _, rs := range req.GetResourceSpans() {
			var service string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, exportedSpan{name: s.GetName(), service: service})
				}
			}
		}
	}
	return out
}

func TestSetupTracing_OffWithoutEndpoint(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"no endpoint", map[string]string{}},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, prop, shutdown, err := obs.SetupTracing(context.Background(), "svc-test", mapEnv(tt.env))
			if err != nil {
				t.Fatalf("SetupTracing: %v", err)
			}
			if _, ok := tp.(tracenoop.TracerProvider); !ok {
				t.Fatalf("provider is %T, want the no-op provider (no exporter)", tp)
			}
			if got := prop.Fields(); len(got) != 3 { // traceparent, tracestate, baggage
				t.Errorf("propagator fields = %v, want W3C trace context + baggage", got)
			}
			if err := shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
}

func TestSetupTracing_OnExportsSpansToOTLPHTTP(t *testing.T) {
	tests := []struct {
		name     string
		env      func(url string) map[string]string
		wantPath string
		wantSvc  string
	}{
		{
			name:     "base endpoint gets /v1/traces",
			env:      func(u string) map[string]string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u + "/"} },
			wantPath: "/v1/traces",
			wantSvc:  "svc-test",
		},
		{
			name: "traces endpoint used as is, gzip, headers, service name override",
			env: func(u string) map[string]string {
				return map[string]string{
					"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": u + "/custom/traces",
					"OTEL_EXPORTER_OTLP_COMPRESSION":     "gzip",
					"OTEL_EXPORTER_OTLP_HEADERS":         "x-tenant=svc%20dev",
					"OTEL_SERVICE_NAME":                  "override",
				}
			},
			wantPath: "/custom/traces",
			wantSvc:  "override",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			col := &collector{}
			srv := httptest.NewServer(col)
			t.Cleanup(srv.Close)

			ctx := context.Background()
			tp, _, shutdown, err := obs.SetupTracing(ctx, "svc-test", mapEnv(tt.env(srv.URL)))
			if err != nil {
				t.Fatalf("SetupTracing: %v", err)
			}
			if _, ok := tp.(*sdktrace.TracerProvider); !ok {
				t.Fatalf("provider is %T, want the SDK provider", tp)
			}
			_, span := tp.Tracer("obs-test").Start(ctx, "record sale")
			span.End()

			// Shutdown flushes the batch processor synchronously: no polling needed.
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			spans := col.spans()
			if len(spans) != 1 || spans[0].name != "record sale" || spans[0].service != tt.wantSvc {
				t.Fatalf("collector got %+v, want one span 'record sale' from %s", spans, tt.wantSvc)
			}
			col.mu.Lock()
			defer col.mu.Unlock()
			if col.paths[0] != tt.wantPath {
				t.Errorf("path = %q, want %q", col.paths[0], tt.wantPath)
			}
			if tt.wantSvc == "override" && col.headers[0].Get("X-Tenant") != "svc dev" {
				t.Errorf("header x-tenant = %q", col.headers[0].Get("X-Tenant"))
			}
		})
	}
}

func TestSetupTracing_RejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"unknown compression", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}},
		{"unknown sampler", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": "sometimes"}},
		{"bad ratio", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, _, err := obs.SetupTracing(context.Background(), "svc-test", mapEnv(tt.env)); err == nil {
				t.Fatal("SetupTracing succeeded, want error")
			}
		})
	}
}

func TestHTTPTracing_ContinuesIncomingTraceAndLogsCarryIt(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, prop, _, err := obs.SetupTracing(context.Background(), "x", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	logger := obs.NewLogger(&logs, "info")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/track/sale", func(w http.ResponseWriter, r *http.Request) {
		logger.InfoContext(r.Context(), "handling")
	})
	h := obs.HTTPTracing(mux, tp, prop, "tracking")

	req := httptest.NewRequest(http.MethodPost, "/api/v1/track/sale", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.ServeHTTP(httptest.NewRecorder(), req)

	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("ended spans = %d, want 1", len(ended))
	}
	s := ended[0]
	if s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("span not a child of the incoming traceparent: trace %s parent %s", s.SpanContext().TraceID(), s.Parent().SpanID())
	}
	if s.SpanKind() != trace.SpanKindServer || s.Name() != "POST /api/v1/track/sale" {
		t.Errorf("span kind %v name %q", s.SpanKind(), s.Name())
	}
	line := decodeLines(t, &logs)[0]
	if line["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || line["span_id"] != s.SpanContext().SpanID().String() {
		t.Errorf("log line trace ids %v/%v, want the server span's", line["trace_id"], line["span_id"])
	}
}

// With tracing off (SetupTracing's no-op provider) the handler still
// continues the caller's trace: logs name it, and a call the route makes
// passes the same trace and baggage on, as the no-op span did under
// otelhttp. A request without them keeps its own context.
func TestHTTPTracing_OffStillPropagates(t *testing.T) {
	t.Parallel()
	tp, prop, _, err := obs.SetupTracing(context.Background(), "x", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(tracenoop.TracerProvider); !ok {
		t.Fatalf("tracing off: provider %T, want the no-op one", tp)
	}
	var logs bytes.Buffer
	logger := obs.NewLogger(&logs, "info")
	var out http.Header
	var plain bool
	h := obs.HTTPTracing(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger.InfoContext(r.Context(), "handling")
		out = http.Header{}
		prop.Inject(r.Context(), propagation.HeaderCarrier(out))
		plain = r.Context() == context.Background()
	}), tp, prop, "tracking")

	req := httptest.NewRequest(http.MethodPost, "/api/v1/track/sale", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("baggage", "tenant=7")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got := out.Get("traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("outgoing traceparent %q, want the incoming one", got)
	}
	if got := out.Get("baggage"); got != "tenant=7" {
		t.Errorf("outgoing baggage %q, want tenant=7", got)
	}
	line := decodeLines(t, &logs)[0]
	if line["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || line["span_id"] != "00f067aa0ba902b7" {
		t.Errorf("log line trace ids %v/%v, want the caller's", line["trace_id"], line["span_id"])
	}

	req = httptest.NewRequest(http.MethodPost, "/api/v1/track/sale", nil).WithContext(context.Background())
	h.ServeHTTP(httptest.NewRecorder(), req)
	if !plain || out.Get("traceparent") != "" {
		t.Errorf("a request without trace context: context replaced %v, outgoing traceparent %q", !plain, out.Get("traceparent"))
	}
}

// TracingTransport with tracing off passes the caller's trace context on
// without touching the caller's request; with none, the request goes as
// it is.
func TestTracingTransport_Off(t *testing.T) {
	t.Parallel()
	tp, prop, _, err := obs.SetupTracing(context.Background(), "x", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Clone())
	}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: obs.TracingTransport(http.DefaultTransport, tp, prop)}

	in := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	ctx := prop.Extract(context.Background(), propagation.HeaderCarrier(in))
	for _, ctx := range []context.Context{ctx, context.Background()} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(req.Header) != 0 {
			t.Errorf("the caller's request was changed: %v", req.Header)
		}
	}
	if len(got) != 2 || got[0].Get("traceparent") != in.Get("traceparent") || got[1].Get("traceparent") != "" {
		t.Errorf("traceparent sent: %q, %q; want the caller's, then none", got[0].Get("traceparent"), got[1].Get("traceparent"))
	}
}

type failerResponse struct{ err error }

func (r failerResponse) Failed() error { return r.err }

func TestEndpointTracing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		resp       any
		err        error
		wantStatus codes.Code
		wantFailed bool
	}{
		{"success leaves status unset", failerResponse{}, nil, codes.Unset, false},
		{"infrastructure error marks span", nil, errors.New("db down"), codes.Error, false},
		{"business error is recorded, not an error", failerResponse{err: errors.New("duplicate transaction")}, nil, codes.Unset, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, parent := tp.Tracer("t").Start(context.Background(), "transport")

			var inner trace.SpanContext
			var ep endpoint.Endpoint = func(ctx context.Context, _ any) (any, error) {
				inner = trace.SpanContextFromContext(ctx)
				return tt.resp, tt.err
			}
			ep = obs.EndpointTracing(tp.Tracer("t"), "RecordSale")(ep)
			resp, err := ep(ctx, struct{}{})
			parent.End()
			if !errors.Is(err, tt.err) || (tt.err == nil && resp == nil) {
				t.Fatalf("middleware changed result: %v %v", resp, err)
			}

			var span sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Name() == "RecordSale" {
					span = s
				}
			}
			if span == nil {
				t.Fatal("no RecordSale span")
			}
			if span.Parent().SpanID() != parent.SpanContext().SpanID() || inner.SpanID() != span.SpanContext().SpanID() {
				t.Errorf("span not nested between transport and endpoint")
			}
			if span.Status().Code != tt.wantStatus {
				t.Errorf("status = %v, want %v", span.Status().Code, tt.wantStatus)
			}
			failed := false
			for _, a := range span.Attributes() {
				if a.Key == attribute.Key("endpoint.failed") && a.Value.AsBool() {
					failed = true
				}
			}
			if failed != tt.wantFailed {
				t.Errorf("endpoint.failed = %v, want %v", failed, tt.wantFailed)
			}
		})
	}
}

func TestDecorateAppliesMiddlewareOutermostFirst(t *testing.T) {
	t.Parallel()
	var order []string
	mw := func(tag string) obs.EndpointMiddleware {
		return func(name string) endpoint.Middleware {
			return func(next endpoint.Endpoint) endpoint.Endpoint {
				return func(ctx context.Context, req any) (any, error) {
					order = append(order, tag+":"+name)
					return next(ctx, req)
				}
			}
		}
	}
	e := obs.Decorate("click", func(context.Context, any) (any, error) { return "ok", nil }, mw("outer"), nil, mw("inner"))
	if out, err := e(context.Background(), nil); out != "ok" || err != nil {
		t.Fatal(out, err)
	}
	if fmt.Sprint(order) != "[outer:click inner:click]" {
		t.Fatalf("order %v", order)
	}
}
