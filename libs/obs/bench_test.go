package obs_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/libs/obs"
)

// BenchmarkLogger_InfoContext is one request log line with a request id, a
// span and a few attributes, through redaction, to io.Discard.
func BenchmarkLogger_InfoContext(b *testing.B) {
	logger := obs.NewLogger(io.Discard, "info", obs.WithContextAttr("request_id", requestIDFrom))
	ctx, _ := spanContext()
	ctx = context.WithValue(ctx, requestIDKey{}, "req-123")
	b.ReportAllocs()
	for b.Loop() {
		logger.InfoContext(ctx, "sale recorded", "program_id", 7, "status", 201, "route", "POST /api/v1/track/sale")
	}
}

// BenchmarkLogger_Baseline is the same line through a bare slog JSON
// handler, to show what the context and redaction layers add.
func BenchmarkLogger_Baseline(b *testing.B) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		logger.InfoContext(ctx, "sale recorded", "request_id", "req-123", "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736",
			"span_id", "00f067aa0ba902b7", "program_id", 7, "status", 201, "route", "POST /api/v1/track/sale")
	}
}

func BenchmarkHTTPMetrics_Middleware(b *testing.B) {
	m, err := obs.NewHTTPMetrics(obs.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	h := m.Middleware("POST /api/v1/track/sale", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/api/v1/track/sale", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}
