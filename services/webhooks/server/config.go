package server

import (
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
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

	// `svc listen` accepts accounts' opaque login tokens by asking
	// accounts' internal route at AccountsURL with InternalToken (a
	// secret: never logged). Either unset: such tokens are refused 401.
	AccountsURL   string `env:"ACCOUNTS_URL"`
	InternalToken string `env:"INTERNAL_TOKEN"`

	// SecretKey seals the endpoints' signing secrets at rest (standard
	// base64 of 32 bytes: `openssl rand -base64 32`). Unset: the service
	// starts, warns, creates no endpoint and delivers nothing (the endpoint
	// routes answer 503), since a secret it sealed could not be opened
	// again under another key.
	SecretKey string `env:"WEBHOOKS_SECRET_KEY"` // secret
	// AllowPrivate lets endpoints use http:// and destinations on
	// loopback, private, link-local and metadata addresses: the local
	// stack and tests only, never a deployment.
	AllowPrivate bool `env:"WEBHOOKS_ALLOW_PRIVATE"`

	// Delivery: Workers attempts at once in the pod, at most
	// EndpointConcurrency of them to one endpoint; each attempt is cut
	// after Timeout; due deliveries are looked for every PollInterval (and
	// at once when an event is written in this pod); an endpoint failing
	// every attempt for DisableAfter is disabled.
	Workers             int           `env:"DELIVERY_WORKERS"`
	EndpointConcurrency int           `env:"ENDPOINT_CONCURRENCY"`
	Timeout             time.Duration `env:"DELIVERY_TIMEOUT"`
	PollInterval        time.Duration `env:"DELIVERY_POLL_INTERVAL"`
	DisableAfter        time.Duration `env:"DISABLE_AFTER"`
}

// SessionIssuer is accounts' issuer of session tokens.
const SessionIssuer = "svc-accounts"

// Defaults.
const (
	// DefaultSettingsRateLimit is the console routes' requests per minute
	// per sign-in token (accounts' settings routes' default).
	DefaultSettingsRateLimit = 30

	DefaultWorkers             = 64
	DefaultEndpointConcurrency = 4
	DefaultTimeout             = 10 * time.Second
	DefaultPollInterval        = time.Second
	DefaultDisableAfter        = 5 * 24 * time.Hour
)

// LoadConfig reads and validates webhooks' configuration from env in one
// place; every problem is reported at once.
func LoadConfig(env *obs.Env) (Config, error) {
	c := Config{
		SessionPublicKey:  env.String("SESSION_PUBLIC_KEY", ""),
		SettingsRateLimit: env.Int("SETTINGS_RATE_LIMIT", DefaultSettingsRateLimit),
		AccountsURL:       env.String("ACCOUNTS_URL", ""),
		InternalToken:     env.Token("INTERNAL_TOKEN"),

		SecretKey:    env.String("WEBHOOKS_SECRET_KEY", ""),
		AllowPrivate: env.Bool("WEBHOOKS_ALLOW_PRIVATE", false),

		Workers:             env.Int("DELIVERY_WORKERS", DefaultWorkers),
		EndpointConcurrency: env.Int("ENDPOINT_CONCURRENCY", DefaultEndpointConcurrency),
		Timeout:             env.Duration("DELIVERY_TIMEOUT", DefaultTimeout),
		PollInterval:        env.Duration("DELIVERY_POLL_INTERVAL", DefaultPollInterval),
		DisableAfter:        env.Duration("DISABLE_AFTER", DefaultDisableAfter),
	}
	if c.SecretKey != "" {
		if _, err := secret.ParseKey(c.SecretKey); err != nil {
			env.Fail(fmt.Errorf("WEBHOOKS_SECRET_KEY: %w", err))
		}
	}
	for name, n := range map[string]int{"DELIVERY_WORKERS": c.Workers, "ENDPOINT_CONCURRENCY": c.EndpointConcurrency, "SETTINGS_RATE_LIMIT": c.SettingsRateLimit} {
		if n <= 0 {
			env.Fail(fmt.Errorf("%s must be positive, got %d", name, n))
		}
	}
	for name, d := range map[string]time.Duration{"DELIVERY_TIMEOUT": c.Timeout, "DELIVERY_POLL_INTERVAL": c.PollInterval, "DISABLE_AFTER": c.DisableAfter} {
		if d <= 0 {
			env.Fail(fmt.Errorf("%s must be positive, got %s", name, d))
		}
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
