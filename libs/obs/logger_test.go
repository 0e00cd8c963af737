package obs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/libs/obs"
)

type requestIDKey struct{}

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func decodeLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func spanContext() (context.Context, trace.SpanContext) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

func TestNewLogger_ContextRecordsCarryRequestAndTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := obs.NewLogger(&buf, "info", obs.WithContextAttr("request_id", requestIDFrom))

	ctx, sc := spanContext()
	ctx = context.WithValue(ctx, requestIDKey{}, "req-123")
	logger.InfoContext(ctx, "sale recorded", "program_id", 7)
	logger.With("component", "relay").InfoContext(ctx, "with attrs")
	logger.Info("no context")

	lines := decodeLines(t, &buf)
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3", len(lines))
	}
	for i, l := range lines[:2] {
		if l["request_id"] != "req-123" {
			t.Errorf("line %d request_id = %v, want req-123", i, l["request_id"])
		}
		if l["trace_id"] != sc.TraceID().String() || l["span_id"] != sc.SpanID().String() {
			t.Errorf("line %d trace_id/span_id = %v/%v, want %s/%s", i, l["trace_id"], l["span_id"], sc.TraceID(), sc.SpanID())
		}
	}
	if lines[0]["program_id"] != float64(7) || lines[1]["component"] != "relay" {
		t.Errorf("ordinary attrs lost: %v / %v", lines[0], lines[1])
	}
	for _, k := range []string{"request_id", "trace_id", "span_id"} {
		if _, ok := lines[2][k]; ok {
			t.Errorf("record without context carries %s", k)
		}
	}
}

func TestNewLogger_OmitsEmptyContextValues(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := obs.NewLogger(&buf, "info", obs.WithContextAttr("request_id", requestIDFrom))
	logger.InfoContext(context.Background(), "no ids")
	l := decodeLines(t, &buf)[0]
	for _, k := range []string{"request_id", "trace_id", "span_id"} {
		if _, ok := l[k]; ok {
			t.Errorf("%s present without a value in context: %v", k, l)
		}
	}
}

func TestNewLogger_Level(t *testing.T) {
	t.Parallel()
	tests := []struct {
		level     string
		wantDebug bool
		wantInfo  bool
	}{
		{"debug", true, true},
		{"DEBUG", true, true},
		{"info", false, true},
		{"", false, true},
		{"warn", false, false},
		{"error", false, false},
		{"nonsense", false, true},
	}
	for _, tt := range tests {
		t.Run("level "+tt.level, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			logger := obs.NewLogger(&buf, tt.level)
			if got := logger.Enabled(context.Background(), slog.LevelDebug); got != tt.wantDebug {
				t.Errorf("debug enabled = %v, want %v", got, tt.wantDebug)
			}
			if got := logger.Enabled(context.Background(), slog.LevelInfo); got != tt.wantInfo {
				t.Errorf("info enabled = %v, want %v", got, tt.wantInfo)
			}
		})
	}
}

func TestParseLevel_RejectsUnknown(t *testing.T) {
	t.Parallel()
	if _, err := obs.ParseLevel("loud"); err == nil {
		t.Fatal("ParseLevel(loud) succeeded, want error")
	}
	if l, err := obs.ParseLevel("warn"); err != nil || l != slog.LevelWarn {
		t.Fatalf("ParseLevel(warn) = %v, %v", l, err)
	}
}

func TestNewLogger_SecretsNeverReachOutput(t *testing.T) {
	t.Parallel()
	const (
		apiKey   = "svc_live_Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LzXcVbNm12345"
		password = "hunter2-very-secret"
		jwt      = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
	)
	tests := []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"token attr", func(l *slog.Logger) { l.Info("x", "token", jwt) }},
		{"api_key attr", func(l *slog.Logger) { l.Info("x", "api_key", apiKey) }},
		{"authorization header attr", func(l *slog.Logger) { l.Info("x", "Authorization", "Bearer "+apiKey) }},
		{"password attr", func(l *slog.Logger) { l.Info("x", "db_password", password) }},
		{"secret attr in group", func(l *slog.Logger) { l.Info("x", slog.Group("cfg", "client_secret", password)) }},
		{"dsn value", func(l *slog.Logger) {
			l.Info("x", "database", "postgres://app:"+password+"@db:5432/svc?sslmode=disable")
		}},
		{"keyword dsn value", func(l *slog.Logger) { l.Info("x", "dsn", "host=db user=app password="+password+" dbname=svc") }},
		{"dsn inside error", func(l *slog.Logger) {
			l.Error("connect failed", "err", errors.New(`dial "postgres://app:`+password+`@db/svc": refused`))
		}},
		{"api key inside message", func(l *slog.Logger) { l.Info("lookup key " + apiKey + " failed") }},
		{"bearer inside free text", func(l *slog.Logger) { l.Info("x", "header_dump", "Authorization: Bearer "+jwt) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			tt.log(obs.NewLogger(&buf, "debug"))
			out := buf.String()
			for _, secret := range []string{apiKey, password, jwt, "Zx9Qw8Er7Ty6"} {
				if strings.Contains(out, secret) {
					t.Fatalf("secret %q leaked: %s", secret, out)
				}
			}
			if !strings.Contains(out, obs.Masked) {
				t.Fatalf("no mask in output: %s", out)
			}
		})
	}
}
