package server

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// readmeConfig parses the README's configuration table: variable → default
// ("" for unset).
func readmeConfig(t *testing.T) (names []string, defaults map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Configuration\n")
	if !ok {
		t.Fatal("README has no ## Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("^\\| `([A-Z0-9_]+)` \\| ([^|]*) \\|")
	defaults = map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		def := strings.TrimSpace(m[2])
		if def == "unset" {
			def = ""
		}
		names = append(names, m[1])
		defaults[m[1]] = strings.Trim(def, "`")
	}
	return names, defaults
}

func TestREADMEConfigTableIsConfig(t *testing.T) {
	names, defaults := readmeConfig(t)
	if want := platformtest.EnvNames(Config{}); !slices.Equal(names, want) {
		t.Fatalf("README configuration table lists\n%v\nConfig reads (in field order)\n%v", names, want)
	}
	// The defaults are LoadConfig's, read with nothing set.
	cfg, err := LoadConfig(obs.NewEnv(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(cfg)
	for i, f := range reflect.VisibleFields(v.Type()) {
		name := f.Tag.Get("env")
		if got, want := defaults[name], fmt.Sprint(v.Field(i).Interface()); got != want {
			t.Errorf("README default of %s is %q, LoadConfig's is %q", name, got, want)
		}
	}
}

// internalToken is a valid INTERNAL_TOKEN (obs.MinTokenBytes or more).
const internalToken = "internal-token-of-the-config-test"

func TestLoadConfig(t *testing.T) {
	env := func(m map[string]string) *obs.Env { return obs.NewEnv(func(k string) string { return m[k] }) }
	t.Run("defaults", func(t *testing.T) {
		cfg, err := LoadConfig(env(nil))
		if err != nil {
			t.Fatal(err)
		}
		want := Config{
			APIKeyDocsURL: "https://docs.svc.dev/api-keys/rotation", ClickRateLimit: 60, LeadRateLimit: 30, VisitRateLimit: 120,
			ConfigRateLimit: 60, PreflightRateLimit: 120, ClickWriters: 2, ClickGroupMax: 64, KeyUseInterval: time.Minute,
		}
		if cfg != want {
			t.Fatalf("got %+v, want %+v", cfg, want)
		}
	})
	t.Run("every variable is read", func(t *testing.T) {
		cfg, err := LoadConfig(env(map[string]string{
			"GEOIP_DB": "/geo.mmdb", "API_KEY_DOCS_URL": "https://docs.example/rotation", "TRACK_CLICK_RATE_LIMIT": "1",
			"TRACK_LEAD_RATE_LIMIT": "2", "TRACK_VISIT_RATE_LIMIT": "3", "TRACK_CONFIG_RATE_LIMIT": "4",
			"TRACK_PREFLIGHT_RATE_LIMIT": "5", "CLICK_WRITERS": "6", "CLICK_GROUP_MAX": "7", "INTERNAL_TOKEN": internalToken,
			"KEY_USE_REPORT_INTERVAL": "5s",
		}))
		if err != nil {
			t.Fatal(err)
		}
		want := Config{
			GeoIPDB: "/geo.mmdb", APIKeyDocsURL: "https://docs.example/rotation", ClickRateLimit: 1, LeadRateLimit: 2,
			VisitRateLimit: 3, ConfigRateLimit: 4, PreflightRateLimit: 5, ClickWriters: 6, ClickGroupMax: 7,
			InternalToken: internalToken, KeyUseInterval: 5 * time.Second,
		}
		if cfg != want {
			t.Fatalf("got %+v, want %+v", cfg, want)
		}
	})
	t.Run("every problem reported", func(t *testing.T) {
		_, err := LoadConfig(env(map[string]string{"TRACK_CLICK_RATE_LIMIT": "0", "CLICK_WRITERS": "-1", "API_KEY_DOCS_URL": "docs", "KEY_USE_REPORT_INTERVAL": "0s"}))
		if err == nil {
			t.Fatal("no error")
		}
		for _, name := range []string{"TRACK_CLICK_RATE_LIMIT", "CLICK_WRITERS", "API_KEY_DOCS_URL", "KEY_USE_REPORT_INTERVAL"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name %s", err, name)
			}
		}
	})
	t.Run("a short INTERNAL_TOKEN refuses to start", func(t *testing.T) {
		_, err := LoadConfig(env(map[string]string{"INTERNAL_TOKEN": "itok"}))
		if err == nil || !strings.Contains(err.Error(), "INTERNAL_TOKEN is 4 bytes: a token must be at least 32 bytes") || strings.Contains(err.Error(), "itok") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unparsable number", func(t *testing.T) {
		if _, err := LoadConfig(env(map[string]string{"CLICK_GROUP_MAX": "many"})); err == nil || !strings.Contains(err.Error(), "CLICK_GROUP_MAX") {
			t.Fatalf("err %v", err)
		}
	})
}
