package obs

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// SetupTracing builds the tracer provider and propagator of a service.
//
// Tracing is on when env returns a non-empty OTEL_EXPORTER_OTLP_ENDPOINT (the
// collector base URL; "/v1/traces" is appended) or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL), unless OTEL_SDK_DISABLED
// is "true" or OTEL_TRACES_EXPORTER is "none". Then spans go through a batch
// span processor to an OTLP/HTTP exporter, with resource service.name =
// OTEL_SERVICE_NAME or serviceName, plus OTEL_RESOURCE_ATTRIBUTES. Otherwise
// the provider is a no-op: no exporter, no goroutine, near-zero cost.
//
// Read through env (pass os.Getenv): the endpoints, OTEL_EXPORTER_OTLP_HEADERS
// (and _TRACES_HEADERS), OTEL_EXPORTER_OTLP_COMPRESSION, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG). The OTel SDK itself
// still reads the rarer knobs (OTEL_BSP_*, OTLP TLS certificate paths) from
// the process environment.
//
// The propagator is always W3C TraceContext + Baggage.
//
// Side effect, on purpose: SetupTracing also installs tp and the propagator
// as the OpenTelemetry globals (otel.SetTracerProvider,
// otel.SetTextMapPropagator), because some instrumentation (otelpgx, otelhttp
// transports built without options) falls back to them. Call it once, from
// cmd/ only; library code takes tp and the propagator as arguments.
//
// shutdown flushes buffered spans; call it with a deadline after the server
// stops.
func SetupTracing(ctx context.Context, serviceName string, env func(string) string) (tp trace.TracerProvider, propagator propagation.TextMapPropagator, shutdown func(context.Context) error, err error) {
	propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	noShutdown := func(context.Context) error { return nil }

	endpoint := tracesEndpoint(env)
	if endpoint == "" || strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(env("OTEL_TRACES_EXPORTER"), "none") {
		tp = tracenoop.NewTracerProvider()
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(propagator)
		return tp, propagator, noShutdown, nil
	}

	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	headers := parseKeyValues(env("OTEL_EXPORTER_OTLP_HEADERS"))
	for k, v := range parseKeyValues(env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")) {
		headers[k] = v
	}
	if len(headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	switch c := strings.ToLower(firstNonEmpty(env("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"), env("OTEL_EXPORTER_OTLP_COMPRESSION"))); c {
	case "gzip":
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	case "", "none":
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.NoCompression))
	default:
		return nil, nil, nil, fmt.Errorf("setup tracing: unsupported OTLP compression %q", c)
	}
	sampler, err := samplerFromEnv(env)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("setup tracing: %w", err)
	}

	if name := env("OTEL_SERVICE_NAME"); name != "" {
		serviceName = name
	}
	attrs := []attribute.KeyValue{}
	for k, v := range parseKeyValues(env("OTEL_RESOURCE_ATTRIBUTES")) {
		attrs = append(attrs, attribute.String(k, v))
	}
	// service.name last so it wins over a service.name in OTEL_RESOURCE_ATTRIBUTES.
	attrs = append(attrs, semconv.ServiceName(serviceName))
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(attrs...),
	)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("setup tracing: build resource: %w", err)
	}

	// otlptracehttp.New does not dial: a collector that is down costs
	// dropped spans later, never a failed start.
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("setup tracing: create otlp exporter for %s: %w", redactURLPasswords(endpoint), err)
	}
	sdktp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	otel.SetTracerProvider(sdktp)
	otel.SetTextMapPropagator(propagator)
	return sdktp, propagator, func(ctx context.Context) error {
		if err := sdktp.Shutdown(ctx); err != nil {
			return fmt.Errorf("shutdown tracer provider: %w", err)
		}
		return nil
	}, nil
}

func tracesEndpoint(env func(string) string) string {
	if e := strings.TrimSpace(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); e != "" {
		return e
	}
	if e := strings.TrimSpace(env("OTEL_EXPORTER_OTLP_ENDPOINT")); e != "" {
		return strings.TrimRight(e, "/") + "/v1/traces"
	}
	return ""
}

func samplerFromEnv(env func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(env("OTEL_TRACES_SAMPLER")))
	ratio := func() (float64, error) {
		arg := strings.TrimSpace(env("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q is not a ratio in [0,1]", arg)
		}
		return f, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		f, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(f), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(f)), nil
	}
	return nil, fmt.Errorf("unsupported OTEL_TRACES_SAMPLER %q", name)
}

// parseKeyValues parses the OTEL "k1=v1,k2=v2" form with URL-encoded values.
func parseKeyValues(s string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if dv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			v = dv
		}
		out[k] = v
	}
	return out
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// TracingTransport wraps base with otelhttp's client spans, parent taken
// from the request's context and passed on through prop. With tracing off
// (tp is the no-op provider) it only passes the request's trace context on,
// without otelhttp's per-request bookkeeping (a fifth of the sale's call to
// tracking, spans or not).
func TracingTransport(base http.RoundTripper, tp trace.TracerProvider, prop propagation.TextMapPropagator) http.RoundTripper {
	if _, off := tp.(tracenoop.TracerProvider); off {
		return propagating{base: base, prop: prop}
	}
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop))
}

// propagating is TracingTransport with tracing off.
type propagating struct {
	base http.RoundTripper
	prop propagation.TextMapPropagator
}

func (p propagating) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{}
	p.prop.Inject(r.Context(), propagation.HeaderCarrier(h))
	if len(h) > 0 {
		// A RoundTripper must not change the caller's request.
		r = r.Clone(r.Context())
		for k, v := range h {
			r.Header[k] = v
		}
	}
	return p.base.RoundTrip(r)
}

// HTTPTracing wraps next with otelhttp: a server span per request, parent
// taken from the incoming traceparent header through prop, named after the
// matched route pattern once the mux has run. operation names the handler in
// otelhttp's bookkeeping. OTel HTTP metrics are disabled here because the
// service exports Prometheus metrics through HTTPMetrics instead.
//
// With tracing off (tp is the no-op provider SetupTracing returns) no span
// is ever recorded, yet otelhttp would still build each request's span
// attributes and wrap its writer and body: about a tenth of a refund's Go
// time in bench-sale. The request then only takes the incoming trace
// context, as the no-op tracer's span would carry it: logs still name the
// caller's trace and outgoing calls still pass it on.
func HTTPTracing(next http.Handler, tp trace.TracerProvider, prop propagation.TextMapPropagator, operation string) http.Handler {
	if _, off := tp.(tracenoop.TracerProvider); off {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header)); ctx != r.Context() {
				r = r.WithContext(ctx)
			}
			next.ServeHTTP(w, r)
		})
	}
	return otelhttp.NewHandler(next, operation,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(prop),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
}
