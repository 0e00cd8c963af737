package obs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// LoggerOption configures NewLogger.
type LoggerOption func(*loggerConfig)

type contextAttr struct {
	key string
	fn  func(context.Context) string
}

type loggerConfig struct {
	ctxAttrs  []contextAttr
	addSource bool
}

// WithContextAttr adds attribute key with the value fn(ctx) to every record
// logged with a context, when fn returns a non-empty string. It exists so the
// logger can stamp request_id from the HTTP kit without obs importing it:
//
//	obs.NewLogger(os.Stdout, cfg.LogLevel, obs.WithContextAttr("request_id", httpkit.RequestIDFrom))
func WithContextAttr(key string, fn func(context.Context) string) LoggerOption {
	return func(c *loggerConfig) {
		if key == "" || fn == nil {
			return
		}
		c.ctxAttrs = append(c.ctxAttrs, contextAttr{key: key, fn: fn})
	}
}

// WithSource adds the caller's file and line to every record. Off by default
// because it costs a runtime.Callers per record.
func WithSource() LoggerOption {
	return func(c *loggerConfig) { c.addSource = true }
}

// NewLogger returns a JSON logger writing to w at the given level ("debug",
// "info", "warn", "error"; anything unparsable means info, use ParseLevel to
// validate config first). Records logged with a context carry trace_id and
// span_id of the OpenTelemetry span in it and the WithContextAttr values;
// attributes whose key or value looks secret are masked (see Redact).
func NewLogger(w io.Writer, level string, opts ...LoggerOption) *slog.Logger {
	var cfg loggerConfig
	for _, o := range opts {
		o(&cfg)
	}
	lvl, err := ParseLevel(level)
	if err != nil {
		lvl = slog.LevelInfo
	}
	inner := slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       lvl,
		AddSource:   cfg.addSource,
		ReplaceAttr: Redact,
	})
	return slog.New(&contextHandler{inner: inner, ctxAttrs: cfg.ctxAttrs})
}

// ParseLevel parses a LOG_LEVEL value, case-insensitively; empty means info.
func ParseLevel(s string) (slog.Level, error) {
	var lvl slog.Level
	s = strings.TrimSpace(s)
	if s == "" {
		return slog.LevelInfo, nil
	}
	if err := lvl.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo, fmt.Errorf("parse log level %q: %w", s, err)
	}
	return lvl, nil
}

// contextHandler adds context-derived attributes at Handle time, because the
// values (request id, active span) are only known per call, not per logger.
//
// Attributes are added to the record, so a logger made with WithGroup nests
// them inside that group; services log request_id from the root logger, so
// this trade was preferred over re-implementing the JSON handler.
type contextHandler struct {
	inner    slog.Handler
	ctxAttrs []contextAttr
}

func (h *contextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		for _, a := range h.ctxAttrs {
			if v := a.fn(ctx); v != "" {
				r.AddAttrs(slog.String(a.key, v))
			}
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(
				slog.String("trace_id", sc.TraceID().String()),
				slog.String("span_id", sc.SpanID().String()),
			)
		}
	}
	return h.inner.Handle(ctx, r)
}

func (h *contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &contextHandler{inner: h.inner.WithAttrs(attrs), ctxAttrs: h.ctxAttrs}
}

func (h *contextHandler) WithGroup(name string) slog.Handler {
	return &contextHandler{inner: h.inner.WithGroup(name), ctxAttrs: h.ctxAttrs}
}
