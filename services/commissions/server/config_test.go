package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

func TestREADMEConfigurationTableMatchesConfig(t *testing.T) {
	platformtest.WantREADMEConfigTable(t, "../README.md", Config{})
}

// Valid shared tokens (obs.MinTokenBytes or more).
const (
	adminTok    = "admin-token-of-the-config-test-0"
	internalTok = "internal-token-of-the-config-test"
)

func TestLoadConfig(t *testing.T) {
	load := func(env map[string]string) (Config, error) {
		return LoadConfig(obs.NewEnv(func(k string) string { return env[k] }))
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := load(nil)
		if err != nil {
			t.Fatal(err)
		}
		want := Config{AdminRateLimit: 1200, FailedAuthRateLimit: 30, SaleRateLimit: 120, APIKeyDocsURL: "https://docs.svc.dev/api-keys/rotation", ApproveInterval: 30 * time.Second,
			BackstopInterval: time.Minute, BackstopGrace: time.Minute, AttributionTimeout: 5 * time.Second, KeyUseInterval: time.Minute,
			SettingsRateLimit: 30}
		if c != want {
			t.Errorf("defaults: %+v, want %+v", c, want)
		}
	})
	t.Run("set", func(t *testing.T) {
		c, err := load(map[string]string{"ADMIN_TOKEN": adminTok, "APPROVE_INTERVAL": "5s", "BACKSTOP_INTERVAL": "2m", "BACKSTOP_GRACE": "0s",
			"TRACKING_URL": "http://tracking:8080", "INTERNAL_TOKEN": internalTok, "ATTRIBUTION_TIMEOUT": "2s", "TRACK_SALE_RATE_LIMIT": "7",
			"API_KEY_DOCS_URL": "https://docs.brand.example/keys", "KEY_USE_REPORT_INTERVAL": "5s"})
		if err != nil {
			t.Fatal(err)
		}
		if c.AdminToken != adminTok || c.ApproveInterval != 5*time.Second || c.BackstopInterval != 2*time.Minute || c.BackstopGrace != 0 ||
			c.TrackingURL != "http://tracking:8080" || c.InternalToken != internalTok || c.AttributionTimeout != 2*time.Second ||
			c.SaleRateLimit != 7 || c.APIKeyDocsURL != "https://docs.brand.example/keys" || c.KeyUseInterval != 5*time.Second {
			t.Errorf("%+v", c)
		}
	})
	t.Run("a short ADMIN_TOKEN or INTERNAL_TOKEN refuses to start", func(t *testing.T) {
		_, err := load(map[string]string{"ADMIN_TOKEN": "t", "INTERNAL_TOKEN": "itok"})
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"ADMIN_TOKEN is 1 bytes: a token must be at least 32 bytes", "INTERNAL_TOKEN is 4 bytes"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "itok") {
			t.Errorf("error %q shows the token", err)
		}
	})
	t.Run("every problem at once", func(t *testing.T) {
		_, err := load(map[string]string{"APPROVE_INTERVAL": "0s", "BACKSTOP_INTERVAL": "-1s", "BACKSTOP_GRACE": "-1m", "ATTRIBUTION_TIMEOUT": "0s",
			"API_KEY_DOCS_URL": "docs", "KEY_USE_REPORT_INTERVAL": "0s", "SESSION_PUBLIC_KEY": "not-a-key"})
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"APPROVE_INTERVAL must be positive", "BACKSTOP_INTERVAL must be positive", "BACKSTOP_GRACE must not be negative",
			"ATTRIBUTION_TIMEOUT must be positive", "API_KEY_DOCS_URL", "KEY_USE_REPORT_INTERVAL must be positive", "SESSION_PUBLIC_KEY"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})
}

// The wiring builds the attribution client only with both TRACKING_URL and
// INTERNAL_TOKEN, says so in the log either way, and never logs the token.
func TestNewDependencies(t *testing.T) {
	t.Parallel()
	const token = "internal-secret-token"
	for _, c := range []struct {
		name       string
		cfg        Config
		client     bool
		err        bool
		logs, word string
	}{
		{"no TRACKING_URL: no client, logged at info", Config{InternalToken: token}, false, false, `"level":"INFO"`, "no TRACKING_URL"},
		{"no INTERNAL_TOKEN: no client, warned", Config{TrackingURL: "http://tracking:8080"}, false, false, `"level":"WARN"`, "INTERNAL_TOKEN is not"},
		{"both: a client with the timeout", Config{TrackingURL: "http://tracking:8080", InternalToken: token, AttributionTimeout: 2 * time.Second},
			true, false, `"level":"INFO"`, "attribution client ready"},
		{"a TRACKING_URL that is no URL: wire fails", Config{TrackingURL: "tracking:8080", InternalToken: token, AttributionTimeout: time.Second},
			false, true, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs strings.Builder
			logger := slog.New(slog.NewJSONHandler(&logs, nil))
			d, err := newDependencies(c.cfg, logger, tracenoop.NewTracerProvider(), propagation.TraceContext{})
			if (err != nil) != c.err || (d.attribution != nil) != c.client {
				t.Fatalf("client %v, err %v", d.attribution != nil, err)
			}
			if err != nil && strings.Contains(err.Error(), token) {
				t.Fatalf("token in %v", err)
			}
			if c.client && d.attribution.Timeout() != c.cfg.AttributionTimeout {
				t.Fatalf("timeout %s", d.attribution.Timeout())
			}
			if !strings.Contains(logs.String(), c.logs) || !strings.Contains(logs.String(), c.word) || strings.Contains(logs.String(), token) {
				t.Fatalf("logs %s", logs.String())
			}
		})
	}
}
