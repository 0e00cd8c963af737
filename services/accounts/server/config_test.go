package server

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

func TestREADMEConfigurationTableMatchesConfig(t *testing.T) {
	platformtest.WantREADMEConfigTable(t, "../README.md", Config{})
}

func TestLoadConfig(t *testing.T) {
	base := map[string]string{"ADMIN_TOKEN": "admin-token-of-the-config-test-0", "SESSION_SIGNING_KEY": "k"}
	load := func(extra map[string]string) (Config, error) {
		return LoadConfig(obs.NewEnv(func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		}))
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := load(nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.SessionTTL != 12*time.Hour || c.AdminRateLimit != 1200 || c.CLIRateLimit != 60 || c.SettingsRateLimit != 30 ||
			c.CLITokenTTL != 720*time.Hour || c.ChainLimitPerHour != 10 || c.TestEventSyncTimeout != 10*time.Second ||
			c.TrackingTimeout != 10*time.Second || c.APIKeyDocsURL != "https://docs.svc.dev/api-keys/rotation" || c.OIDC.Enabled ||
			!slices.Equal(c.OIDC.Algorithms, []string{"RS256", "ES256"}) || c.TrackingURL != "" || c.CommissionsURL != "" || c.KeyUseInterval != time.Minute {
			t.Errorf("defaults: %+v", c)
		}
	})
	t.Run("the addresses test events go to: tracking (click, lead) and commissions (sale)", func(t *testing.T) {
		c, err := load(map[string]string{"TRACKING_URL": "http://tracking:8080", "COMMISSIONS_URL": "http://commissions:8080"})
		if err != nil || c.TrackingURL != "http://tracking:8080" || c.CommissionsURL != "http://commissions:8080" {
			t.Fatalf("TRACKING_URL %q, COMMISSIONS_URL %q, %v", c.TrackingURL, c.CommissionsURL, err)
		}
	})
	t.Run("every problem at once", func(t *testing.T) {
		env := map[string]string{"OIDC_ISSUER": "https://id.example", "CHAIN_LIMIT_PER_HOUR": "0", "KEY_USE_REPORT_INTERVAL": "0s"}
		_, err := LoadConfig(obs.NewEnv(func(k string) string { return env[k] }))
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"ADMIN_TOKEN", "SESSION_SIGNING_KEY", "OIDC_AUDIENCE is required", "CHAIN_LIMIT_PER_HOUR must be at least 1", "KEY_USE_REPORT_INTERVAL must be positive"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})
	t.Run("a short ADMIN_TOKEN refuses to start", func(t *testing.T) {
		_, err := load(map[string]string{"ADMIN_TOKEN": "t"})
		if err == nil || !strings.Contains(err.Error(), "ADMIN_TOKEN is 1 bytes: a token must be at least 32 bytes") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("dashboard sign-in", func(t *testing.T) {
		c, err := load(map[string]string{"PUBLIC_URL": "https://app.example.com/"})
		if err != nil || c.PublicURL != "https://app.example.com" || c.DashboardURL != "/dashboard/" {
			t.Fatalf("PUBLIC_URL %q, DASHBOARD_URL %q, %v", c.PublicURL, c.DashboardURL, err)
		}
		for _, tc := range []struct{ k, v, want string }{
			{"PUBLIC_URL", "app.example.com", "PUBLIC_URL must be an http(s) address"},
			{"PUBLIC_URL", "https://app.example.com/base", "PUBLIC_URL must be an http(s) address"},
			{"PUBLIC_URL", "javascript:x", "PUBLIC_URL must be an http(s) address"},
			{"DASHBOARD_URL", "https://evil.example/", "DASHBOARD_URL must be a path on this site"},
			{"DASHBOARD_URL", "//evil.example", "DASHBOARD_URL must be a path on this site"},
		} {
			if _, err := load(map[string]string{tc.k: tc.v}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s=%q: %v, want %q", tc.k, tc.v, err, tc.want)
			}
		}
	})
	t.Run("sign-up is invite-only unless SIGNUP says open; anything else refuses to start", func(t *testing.T) {
		if c, err := load(nil); err != nil || c.Signup != "invite" {
			t.Fatalf("default SIGNUP %q, %v", c.Signup, err)
		}
		if c, err := load(map[string]string{"SIGNUP": "open"}); err != nil || c.Signup != "open" {
			t.Fatalf("SIGNUP=open: %q, %v", c.Signup, err)
		}
		for _, v := range []string{"Open", "closed", "INVITE"} {
			if _, err := load(map[string]string{"SIGNUP": v}); err == nil || !strings.Contains(err.Error(), `SIGNUP must be "open" or "invite", got "`+v+`"`) {
				t.Errorf("SIGNUP=%q: %v", v, err)
			}
		}
	})
	t.Run("oidc on", func(t *testing.T) {
		c, err := load(map[string]string{"OIDC_ISSUER": "https://id.example", "OIDC_AUDIENCE": "cli"})
		if err != nil || !c.OIDC.Enabled {
			t.Fatalf("%+v %v", c.OIDC, err)
		}
	})
}
