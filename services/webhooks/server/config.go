package server

import (
	"fmt"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
)

// Config is webhooks' whole configuration: every variable the service reads
// besides the platform's common ones (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, LOG_LEVEL, TRUSTED_PROXIES, OTEL_*, …: libs/platform). The
// env tag names each field's variable; LoadConfig reads them all, and the
// README's Configuration table is checked against the tags
// (config_test.go). Wire reads nothing but this struct.
type Config struct {
	// The console's endpoint routes (/api/v1/programs/{id}/webhooks…):
	// dashboard session tokens are verified with accounts' public key;
	// unset, every caller is signed out (401). The limit is the settings
	// routes' (same variable as accounts'), per sign-in token.
	SessionPublicKey  string `env:"SESSION_PUBLIC_KEY"`
	SettingsRateLimit int    `env:"SETTINGS_RATE_LIMIT"`
}

// SessionIssuer is accounts' issuer of session tokens.
const SessionIssuer = "svc-accounts"

// Defaults.
const (
	// DefaultSettingsRateLimit is the console routes' requests per minute
	// per sign-in token (accounts' settings routes' default).
	DefaultSettingsRateLimit = 30
)

// LoadConfig reads and validates webhooks' configuration from env in one
// place; every problem is reported at once.
func LoadConfig(env *obs.Env) (Config, error) {
	c := Config{
		SessionPublicKey:  env.String("SESSION_PUBLIC_KEY", ""),
		SettingsRateLimit: env.Int("SETTINGS_RATE_LIMIT", DefaultSettingsRateLimit),
	}
	if c.SessionPublicKey != "" {
		if _, err := session.ParsePublicKey(c.SessionPublicKey); err != nil {
			env.Fail(fmt.Errorf("SESSION_PUBLIC_KEY: %w", err))
		}
	}
	if err := env.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}
