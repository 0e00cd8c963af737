package server

import (
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
)

// Config is analytics' whole configuration besides the platform's common
// variables (HTTP_ADDR, DATABASE_URL, KAFKA_BROKERS, …: libs/platform). The
// env tag names each field's variable; the README's Configuration table is
// checked against the tags (config_test.go).
type Config struct {
	// SessionPublicKey verifies dashboard session tokens locally (accounts
	// signs them with SESSION_SIGNING_KEY). Unset: every caller of the
	// dashboard routes is signed out (logged at start).
	SessionPublicKey string `env:"SESSION_PUBLIC_KEY"`

	// GET /api/v1/programs/me/readiness requests per minute per API key.
	ReadinessRateLimit int `env:"READINESS_RATE_LIMIT"`
	// GET /api/v1/programs/me/analytics/sources requests per minute per
	// API key (a bucket of its own).
	SourcesRateLimit int `env:"SOURCES_RATE_LIMIT"`
	// Failed authentications (401s of readiness and sources together) per
	// minute per client IP; past it both routes answer 429 before any key
	// lookup, as sale and refund do.
	FailedAuthRateLimit int `env:"FAILED_AUTH_RATE_LIMIT"`
	// KeyUseInterval is how often the keys that authenticated are reported
	// to accounts (the console's last use of a key).
	KeyUseInterval time.Duration `env:"KEY_USE_REPORT_INTERVAL"`
	// InternalToken authenticates accounts on GET
	// /internal/v1/programs/{id}/partner-figures (the console's partners
	// list). Unset: that route answers 503 and the list shows no figures.
	InternalToken string `env:"INTERNAL_TOKEN"` // secret
}

// The spec's 30 per minute per key, for each route.
const (
	DefaultReadinessRateLimit = 30
	DefaultSourcesRateLimit   = 30
	// DefaultFailedAuthLimit is the other services' default.
	DefaultFailedAuthLimit = 30
)

// SessionIssuer is accounts' issuer of session tokens (accounts'
// server.SessionIssuer; the server test checks they agree).
const SessionIssuer = "svc-accounts"

// LoadConfig reads and validates analytics' configuration.
func LoadConfig(env *obs.Env) (Config, error) {
	c := Config{
		SessionPublicKey:    env.String("SESSION_PUBLIC_KEY", ""),
		ReadinessRateLimit:  env.Int("READINESS_RATE_LIMIT", DefaultReadinessRateLimit),
		SourcesRateLimit:    env.Int("SOURCES_RATE_LIMIT", DefaultSourcesRateLimit),
		FailedAuthRateLimit: env.Int("FAILED_AUTH_RATE_LIMIT", DefaultFailedAuthLimit),
		KeyUseInterval:      env.Duration("KEY_USE_REPORT_INTERVAL", catalogsync.DefaultKeyUseInterval),
		InternalToken:       env.Token("INTERNAL_TOKEN"),
	}
	if c.KeyUseInterval <= 0 {
		env.Fail(fmt.Errorf("KEY_USE_REPORT_INTERVAL must be positive, got %s", c.KeyUseInterval))
	}
	if c.ReadinessRateLimit <= 0 {
		env.Fail(fmt.Errorf("READINESS_RATE_LIMIT must be positive, got %d", c.ReadinessRateLimit))
	}
	if c.SourcesRateLimit <= 0 {
		env.Fail(fmt.Errorf("SOURCES_RATE_LIMIT must be positive, got %d", c.SourcesRateLimit))
	}
	if c.FailedAuthRateLimit <= 0 {
		env.Fail(fmt.Errorf("FAILED_AUTH_RATE_LIMIT must be positive, got %d", c.FailedAuthRateLimit))
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
