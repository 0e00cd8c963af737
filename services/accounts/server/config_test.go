package server

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/obs"
)

// envNames lists the env tags of t's fields, nested structs included.
func envNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if name := f.Tag.Get("env"); name != "" {
			names = append(names, name)
		} else if f.Type.Kind() == reflect.Struct {
			names = append(names, envNames(f.Type)...)
		}
	}
	return names
}

// readmeConfigVars lists the variables of the table in the README's
// "## Configuration" section, in order.
func readmeConfigVars(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Configuration\n")
	if start < 0 {
		t.Fatal("README.md has no ## Configuration section")
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\|")
	var vars []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		vars = append(vars, m[1])
	}
	return vars
}

func TestREADMEConfigurationTableMatchesConfig(t *testing.T) {
	inStruct := envNames(reflect.TypeOf(Config{}))
	inREADME := readmeConfigVars(t)
	if len(inREADME) == 0 {
		t.Fatal("README.md's Configuration table has no rows")
	}
	a, b := slices.Sorted(slices.Values(inStruct)), slices.Sorted(slices.Values(inREADME))
	if !slices.Equal(a, b) {
		t.Errorf("README Configuration table and Config differ:\nConfig: %v\nREADME: %v", a, b)
	}
	if len(slices.Compact(b)) != len(inREADME) {
		t.Errorf("README Configuration table names a variable twice: %v", inREADME)
	}
}

func TestLoadConfig(t *testing.T) {
	base := map[string]string{"ADMIN_TOKEN": "t", "SESSION_SIGNING_KEY": "k"}
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
			!slices.Equal(c.OIDC.Algorithms, []string{"RS256", "ES256"}) {
			t.Errorf("defaults: %+v", c)
		}
	})
	t.Run("every problem at once", func(t *testing.T) {
		env := map[string]string{"OIDC_ISSUER": "https://id.example", "CHAIN_LIMIT_PER_HOUR": "0"}
		_, err := LoadConfig(obs.NewEnv(func(k string) string { return env[k] }))
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"ADMIN_TOKEN", "SESSION_SIGNING_KEY", "OIDC_AUDIENCE is required", "CHAIN_LIMIT_PER_HOUR must be at least 1"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
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
