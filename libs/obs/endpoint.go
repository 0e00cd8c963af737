package obs

import (
	"context"

	"github.com/go-kit/kit/endpoint"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// EndpointTracing returns a go-kit middleware that runs each endpoint call
// in an internal span called name, a child of the transport span in ctx.
// go-kit has no OpenTelemetry support of its own (its tracing package covers
// OpenCensus/Zipkin only), hence this one.
//
// An endpoint error (an infrastructure failure, by house rule) marks the
// span as an error. A business error carried in the response through
// endpoint.Failer is recorded as an event and the attribute
// endpoint.failed=true but leaves the span status unset: a refused sale is
// the service working, not failing.
func EndpointTracing(tracer trace.Tracer, name string) endpoint.Middleware {
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		return func(ctx context.Context, request any) (any, error) {
			ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
			defer span.End()
			resp, err := next(ctx, request)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				return resp, err
			}
			if f, ok := resp.(endpoint.Failer); ok {
				if ferr := f.Failed(); ferr != nil {
					span.SetAttributes(attribute.Bool("endpoint.failed", true))
					span.AddEvent("business error", trace.WithAttributes(attribute.String("error.message", ferr.Error())))
				}
			}
			return resp, nil
		}
	}
}

// EndpointMiddleware decorates one named endpoint (the name labels spans
// and metrics). Every feature's endpoints.New takes a list of them.
type EndpointMiddleware func(name string) endpoint.Middleware

// Tracing is EndpointTracing as an EndpointMiddleware.
func Tracing(tracer trace.Tracer) EndpointMiddleware {
	return func(name string) endpoint.Middleware { return EndpointTracing(tracer, name) }
}

// Decorate wraps e in mw, the first outermost: the one helper every
// endpoint set uses instead of its own wrap closure.
func Decorate(name string, e endpoint.Endpoint, mw ...EndpointMiddleware) endpoint.Endpoint {
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i] != nil {
			e = mw[i](name)(e)
		}
	}
	return e
}
