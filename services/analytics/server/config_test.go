package server

import (
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
	if c, err := load(nil); err != nil || c != (Config{ReadinessRateLimit: 30, SourcesRateLimit: 30, FailedAuthRateLimit: 30, KeyUseInterval: time.Minute}) {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	if _, err := load(map[string]string{"SESSION_PUBLIC_KEY": "not base64!"}); err == nil {
		t.Fatal("a malformed SESSION_PUBLIC_KEY was accepted")
	}
	if c, err := load(map[string]string{"KEY_USE_REPORT_INTERVAL": "5s"}); err != nil || c.KeyUseInterval != 5*time.Second {
		t.Fatalf("KEY_USE_REPORT_INTERVAL: %+v %v", c, err)
	}
	if _, err := load(map[string]string{"KEY_USE_REPORT_INTERVAL": "0s"}); err == nil {
		t.Fatal("a zero KEY_USE_REPORT_INTERVAL was accepted")
	}
	key := "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
	if _, err := load(map[string]string{"SESSION_PUBLIC_KEY": key}); err != nil {
		t.Fatalf("a 32-byte key: %v", err)
	}
}
