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
		"HTTP_ADDR":            ":8080",
		"DATABASE_URL":         "postgres://app:s3cr3t@db:5432/svc?sslmode=disable",
		"SESSION_SIGNING_KEY":  "c2VlZHNlZWRzZWVk",
		"SESSION_PUBLIC_KEY":   "cHVibGlj",
		"WEBHOOK_SECRET":       "whsec_abc",
		"ADMIN_PASSWORD":       "pw",
		"API_TOKEN":            "tok",
		"ADMIN_TOKEN_PREVIOUS": "old-admin",
		"EMPTY_SECRET":         "",
		"CLI_TOKEN_TTL":        "720h0m0s",
		"API_KEY_DOCS_URL":     "https://docs.svc.example/api-keys",
	})
	var line struct {
		Msg    string            `json:"msg"`
		Config map[string]string `json:"config"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%s: %v", buf.String(), err)
	}
	want := map[string]string{
		"HTTP_ADDR":            ":8080",
		"DATABASE_URL":         "postgres://app:***@db:5432/svc?sslmode=disable",
		"SESSION_SIGNING_KEY":  "***",
		"SESSION_PUBLIC_KEY":   "cHVibGlj",
		"WEBHOOK_SECRET":       "***",
		"ADMIN_PASSWORD":       "***",
		"API_TOKEN":            "***",
		"ADMIN_TOKEN_PREVIOUS": "***",
		"EMPTY_SECRET":         "",
		// Through the logger's own Redact too, which masks attributes
		// whose key contains "token" or "api_key".
		"CLI_TOKEN_TTL":    "720h0m0s",
		"API_KEY_DOCS_URL": "https://docs.svc.example/api-keys",
	}
	if line.Msg != "config" {
		t.Errorf("msg = %q", line.Msg)
	}
	if len(line.Config) != len(want) {
		t.Errorf("config has %d keys, want %d: %v", len(line.Config), len(want), line.Config)
	}
	for k, v := range want {
		if line.Config[k] != v {
			t.Errorf("%s = %q, want %q", k, line.Config[k], v)
		}
	}
	for _, secret := range []string{"s3cr3t", "c2VlZHNlZWRzZWVk", "whsec_abc", "tok\"", "old-admin"} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("secret %q leaked: %s", secret, buf.String())
		}
	}
	if i, j := strings.Index(buf.String(), `"ADMIN_PASSWORD"`), strings.Index(buf.String(), `"WEBHOOK_SECRET"`); i < 0 || j < i {
		t.Errorf("keys not sorted: %s", buf.String())
	}
}

// Every variable the services and libs read through Env (grep
// 'Env.String("' and the other readers under services/ and libs/), plus
// the documented ones read elsewhere, and whether its value is a secret.
// A new variable belongs here.
func TestMaskConfigValue_ProjectVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key    string
		secret bool
	}{
		// libs/platform
		{"HTTP_ADDR", false},
		{"DATABASE_URL", false}, // its password is masked by RedactString, below
		{"DB_MAX_CONNS", false},
		{"DB_PLAN_CACHE_MODE", false},
		{"DB_SCHEMA", false},
		{"INBOX_RETENTION", false},
		{"KAFKA_BROKERS", false},
		{"KAFKA_TOPIC_PARTITIONS", false},
		{"LOG_LEVEL", false},
		{"OUTBOX_DELETE_SENT", false},
		{"OUTBOX_POLL_INTERVAL", false},
		{"SHUTDOWN_GRACE", false},
		{"TRUSTED_PROXIES", false},
		// services/accounts
		{"ADMIN_TOKEN", true},
		{"ADMIN_RATE_LIMIT", false},
		{"SESSION_SIGNING_KEY", true},
		{"SESSION_TTL", false},
		{"CATALOG_CONSUMERS", false},
		{"CLI_RATE_LIMIT", false},
		{"CLI_LOGIN_REDIRECT_URL", false},
		{"CLI_TOKEN_TTL", false},
		{"SETTINGS_RATE_LIMIT", false},
		{"OIDC_ISSUER", false},
		{"OIDC_AUDIENCE", false},
		{"OIDC_AUTH_URL", false},
		{"OIDC_JWKS_URL", false},
		{"OIDC_JWKS_FILE", false},
		{"OIDC_SIGNING_ALGS", false},
		{"CHAIN_LIMIT_PER_HOUR", false},
		{"TRACKING_URL", false},
		{"TRACKING_TIMEOUT", false},
		{"TEST_EVENT_SYNC_TIMEOUT", false},
		// services/tracking
		{"SESSION_PUBLIC_KEY", false}, // the verifying half: see isSecretConfigKey
		{"PROCESSOR_WEBHOOK_SECRET", true},
		{"API_KEY_DOCS_URL", false},
		{"GEOIP_DB", false},
		{"CLICK_GROUP_MAX", false},
		{"CLICK_WRITERS", false},
		{"TRACK_CLICK_RATE_LIMIT", false},
		{"TRACK_CONFIG_RATE_LIMIT", false},
		{"TRACK_LEAD_RATE_LIMIT", false},
		{"TRACK_SALE_RATE_LIMIT", false},
		{"TRACK_VISIT_RATE_LIMIT", false},
		// libs/obs tracing (read with getenv, not logged by LogConfig today)
		{"OTEL_EXPORTER_OTLP_ENDPOINT", false},
		{"OTEL_EXPORTER_OTLP_HEADERS", true},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", true},
		{"OTEL_SERVICE_NAME", false},
		// rotation and spelling
		{"ADMIN_TOKEN_PREVIOUS", true},
		{"SESSION_SIGNING_KEY_PREVIOUS", true},
		{"PROCESSOR_WEBHOOK_SECRET_PREVIOUS", true},
		{"PROCESSOR_PLATFORM_ACCOUNT", false},
		{"CLI_TOKEN_TTL_PREVIOUS", false},
		{"admin-token", true},
		{"Session_Public_Key", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			const v = "value-1"
			want := v
			if tt.secret {
				want = obs.Masked
			}
			if got := obs.MaskConfigValue(tt.key, v); got != want {
				t.Errorf("MaskConfigValue(%q, %q) = %q, want %q", tt.key, v, got, want)
			}
			if got := obs.MaskConfigValue(tt.key, ""); got != "" {
				t.Errorf("MaskConfigValue(%q, \"\") = %q, want empty", tt.key, got)
			}
		})
	}
}

func TestMaskConfigValue_RedactsPasswordsOfNonSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, value, want string
	}{
		{"DATABASE_URL password", "DATABASE_URL", "postgres://app:s3cr3t@db:5432/svc?sslmode=disable", "postgres://app:***@db:5432/svc?sslmode=disable"},
		{"DATABASE_URL keyword DSN", "DATABASE_URL", "host=db user=app password=s3cr3t dbname=svc", "host=db user=app password=*** dbname=svc"},
		{"DATABASE_URL without password", "DATABASE_URL", "postgres://app@db/svc", "postgres://app@db/svc"},
		{"TRACKING_URL with credentials", "TRACKING_URL", "http://svc:s3cr3t@tracking:8080", "http://svc:***@tracking:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := obs.MaskConfigValue(tt.key, tt.value); got != tt.want {
				t.Errorf("MaskConfigValue(%q, %q) = %q, want %q", tt.key, tt.value, got, tt.want)
			}
		})
	}
}

// A shared token (ADMIN_TOKEN, INTERNAL_TOKEN) shorter than MinTokenBytes is
// a configuration error naming the variable, never the value; unset is fine
// for Token and an error for RequiredToken.
func TestEnv_Token(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", obs.MinTokenBytes)
	for _, tc := range []struct {
		name     string
		value    string
		required bool
		want     string // "" means no error
	}{
		{"unset, optional", "", false, ""},
		{"unset, required", "", true, "ADMIN_TOKEN is required"},
		{"32 bytes", long, false, ""},
		{"32 bytes, required", long, true, ""},
		{"31 bytes", long[1:], false, "ADMIN_TOKEN is 31 bytes: a token must be at least 32 bytes"},
		{"short, required", "s3cret-value", true, "ADMIN_TOKEN is 12 bytes: a token must be at least 32 bytes"},
		// Bytes, not characters: 11 three-byte runes are 33 bytes.
		{"multi-byte", strings.Repeat("€", 11), false, ""},
		// Surrounding blanks are trimmed like every variable's.
		{"padded", "  " + long[2:] + "  ", false, "ADMIN_TOKEN is 30 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := obs.NewEnv(mapEnv(map[string]string{"ADMIN_TOKEN": tc.value}))
			var got string
			if tc.required {
				got = env.RequiredToken("ADMIN_TOKEN")
			} else {
				got = env.Token("ADMIN_TOKEN")
			}
			if got != strings.TrimSpace(tc.value) {
				t.Errorf("value %q, want %q", got, strings.TrimSpace(tc.value))
			}
			err := env.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Err = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Err = %v, want %q", err, tc.want)
			case tc.value != "" && err != nil && strings.Contains(err.Error(), strings.TrimSpace(tc.value)):
				t.Fatalf("error %q shows the token", err)
			}
		})
	}
}
