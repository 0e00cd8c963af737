package obs_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/obs"
)

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestEnv_ParsesTypedValuesAndDefaults(t *testing.T) {
	t.Parallel()
	env := obs.NewEnv(mapEnv(map[string]string{
		"HTTP_ADDR":       " :9090 ",
		"DB_MAX_CONNS":    "16",
		"DEBUG":           "true",
		"SHUTDOWN":        "5s",
		"KAFKA_BROKERS":   "a:9092, b:9092,,",
		"TRUSTED_PROXIES": "",
	}))
	if got := env.String("HTTP_ADDR", ":8080"); got != ":9090" {
		t.Errorf("String = %q", got)
	}
	if got := env.String("LOG_LEVEL", "info"); got != "info" {
		t.Errorf("String default = %q", got)
	}
	if got := env.Int("DB_MAX_CONNS", 32); got != 16 {
		t.Errorf("Int = %d", got)
	}
	if got := env.Int("OTHER_INT", 3); got != 3 {
		t.Errorf("Int default = %d", got)
	}
	if got := env.Bool("DEBUG", false); !got {
		t.Errorf("Bool = %v", got)
	}
	if got := env.Duration("SHUTDOWN", time.Second); got != 5*time.Second {
		t.Errorf("Duration = %v", got)
	}
	if got := env.List("KAFKA_BROKERS", nil); !slices.Equal(got, []string{"a:9092", "b:9092"}) {
		t.Errorf("List = %q", got)
	}
	if got := env.List("TRUSTED_PROXIES", []string{"10.0.0.0/8"}); !slices.Equal(got, []string{"10.0.0.0/8"}) {
		t.Errorf("List default = %q", got)
	}
	if err := env.Err(); err != nil {
		t.Fatalf("Err = %v", err)
	}
	if v := env.Values(); v["LOG_LEVEL"] != "info" || v["HTTP_ADDR"] != ":9090" {
		t.Errorf("Values = %v", v)
	}
}

func TestEnv_CollectsEveryProblem(t *testing.T) {
	t.Parallel()
	env := obs.NewEnv(mapEnv(map[string]string{"N": "x", "B": "maybe", "D": "5"}))
	env.Required("DATABASE_URL")
	env.Int("N", 1)
	env.Bool("B", false)
	env.Duration("D", time.Second)
	err := env.Err()
	if err == nil {
		t.Fatal("Err = nil, want errors")
	}
	for _, want := range []string{"DATABASE_URL is required", "N:", "B:", "D:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestLogConfig_MasksSecrets(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := obs.NewLogger(&buf, "info")
	obs.LogConfig(logger, map[string]string{
		"HTTP_ADDR":           ":8080",
		"DATABASE_URL":        "postgres://app:s3cr3t@db:5432/svc?sslmode=disable",
		"SESSION_SIGNING_KEY": "c2VlZHNlZWRzZWVk",
		"SESSION_PUBLIC_KEY":  "cHVibGlj",
		"WEBHOOK_SECRET":      "whsec_abc",
		"ADMIN_PASSWORD":      "pw",
		"API_TOKEN":           "tok",
		"EMPTY_SECRET":        "",
	})
	var line struct {
		Msg    string            `json:"msg"`
		Config map[string]string `json:"config"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%s: %v", buf.String(), err)
	}
	want := map[string]string{
		"HTTP_ADDR":           ":8080",
		"DATABASE_URL":        "postgres://app:***@db:5432/svc?sslmode=disable",
		"SESSION_SIGNING_KEY": "***",
		"SESSION_PUBLIC_KEY":  "***",
		"WEBHOOK_SECRET":      "***",
		"ADMIN_PASSWORD":      "***",
		"API_TOKEN":           "***",
		"EMPTY_SECRET":        "",
	}
	if line.Msg != "config" {
		t.Errorf("msg = %q", line.Msg)
	}
	for k, v := range want {
		if line.Config[k] != v {
			t.Errorf("%s = %q, want %q", k, line.Config[k], v)
		}
	}
	for _, secret := range []string{"s3cr3t", "c2VlZHNlZWRzZWVk", "whsec_abc", "tok\""} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("secret %q leaked: %s", secret, buf.String())
		}
	}
}
