package server

import (
	"encoding/base64"
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
	load := func(env map[string]string) (Config, error) {
		return LoadConfig(obs.NewEnv(func(k string) string { return env[k] }))
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := load(nil)
		if err != nil {
			t.Fatal(err)
		}
		want := Config{SettingsRateLimit: 30, Workers: 64, EndpointConcurrency: 4, Timeout: 10 * time.Second, PollInterval: time.Second,
			DisableAfter: 120 * time.Hour}
		if c != want {
			t.Errorf("defaults: %+v, want %+v", c, want)
		}
	})
	t.Run("set", func(t *testing.T) {
		key := base64.StdEncoding.EncodeToString(make([]byte, 32))
		c, err := load(map[string]string{"WEBHOOKS_SECRET_KEY": key, "WEBHOOKS_ALLOW_PRIVATE": "true", "SETTINGS_RATE_LIMIT": "7",
			"DELIVERY_WORKERS": "8", "ENDPOINT_CONCURRENCY": "2", "DELIVERY_TIMEOUT": "3s", "DELIVERY_POLL_INTERVAL": "200ms", "DISABLE_AFTER": "1h"})
		if err != nil {
			t.Fatal(err)
		}
		want := Config{SecretKey: key, AllowPrivate: true, SettingsRateLimit: 7, Workers: 8, EndpointConcurrency: 2, Timeout: 3 * time.Second,
			PollInterval: 200 * time.Millisecond, DisableAfter: time.Hour}
		if c != want {
			t.Errorf("%+v, want %+v", c, want)
		}
	})
	t.Run("every bad value is reported at once", func(t *testing.T) {
		_, err := load(map[string]string{"WEBHOOKS_SECRET_KEY": "c2hvcnQ=", "SETTINGS_RATE_LIMIT": "0", "DELIVERY_TIMEOUT": "-1s", "SESSION_PUBLIC_KEY": "nope"})
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"WEBHOOKS_SECRET_KEY", "SETTINGS_RATE_LIMIT", "DELIVERY_TIMEOUT", "SESSION_PUBLIC_KEY"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v does not name %s", err, want)
			}
		}
		if strings.Contains(err.Error(), "c2hvcnQ=") {
			t.Errorf("the error shows the key: %v", err)
		}
	})
}

// The stand-in for the dispatcher's destination check: https always, http
// only when private destinations are allowed.
