package server

import (
	"fmt"
	"net/url"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
)

// Config is commissions' whole configuration: every variable the service
// reads besides the platform's common ones (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, LOG_LEVEL, TRUSTED_PROXIES, OTEL_*, …: libs/platform). The
// env tag names each field's variable; LoadConfig reads them all, and the
// README's Configuration table is checked against the tags
// (config_test.go). Wire reads nothing but this struct.
type Config struct {
	// Admin API (/admin/v1/ on this service's port): the same token as
	// accounts'. Unset: every admin route answers 401.
	AdminToken          string `env:"ADMIN_TOKEN"` // secret
	AdminRateLimit      int    `env:"ADMIN_RATE_LIMIT"`
	FailedAuthRateLimit int    `env:"FAILED_AUTH_RATE_LIMIT"`

	// POST /api/v1/track/sale and /refund: one bucket per API key for
	// both (the spec's 120/min combined); APIKeyDocsURL is the docs_url of
	// key rotation warnings.
	SaleRateLimit int    `env:"TRACK_SALE_RATE_LIMIT"`
	APIKeyDocsURL string `env:"API_KEY_DOCS_URL"`
	// KeyUseInterval is how often the keys that authenticated are reported
	// to accounts (the console's last use of a key).
	KeyUseInterval time.Duration `env:"KEY_USE_REPORT_INTERVAL"`

	// Runners.
	ApproveInterval  time.Duration `env:"APPROVE_INTERVAL"`
	BackstopInterval time.Duration `env:"BACKSTOP_INTERVAL"`
	BackstopGrace    time.Duration `env:"BACKSTOP_GRACE"`

	// Tracking's attribution decisions (POST /internal/v1/attributions on
	// tracking's own port), asked by the sale route. TrackingURL unset: no
	// client is built. InternalToken is tracking's INTERNAL_TOKEN, sent as
	// Bearer; AttributionTimeout bounds each call.
	TrackingURL        string        `env:"TRACKING_URL"`
	InternalToken      string        `env:"INTERNAL_TOKEN"` // secret
	AttributionTimeout time.Duration `env:"ATTRIBUTION_TIMEOUT"`

	// The payment processor's webhook (POST /api/v1/webhooks/processor):
	// signatures are checked against the secret and, while it is rotated,
	// the previous one. Unset: the route is not served.
	ProcessorWebhookSecret         string `env:"PROCESSOR_WEBHOOK_SECRET"`          // secret
	ProcessorWebhookSecretPrevious string `env:"PROCESSOR_WEBHOOK_SECRET_PREVIOUS"` // secret
	// ProcessorPlatformAccount names the platform's own processor account.
	// Events without `account` are that account's payments; only when it
	// is set are they routed by their metadata program_id (whoever can
	// create a payment on the platform's account picks the program with
	// it). Unset: such events are stored and change nothing.
	ProcessorPlatformAccount string `env:"PROCESSOR_PLATFORM_ACCOUNT"`

	// The console's commissions and payouts routes (/api/v1/programs/{id}/
	// commissions, …/payouts): dashboard session tokens are verified with
	// accounts' public key (accounts signs them with SESSION_SIGNING_KEY);
	// unset, every caller of these routes is signed out (401). The limit is
	// the settings routes' (same variable as accounts'), per sign-in token.
	SessionPublicKey  string `env:"SESSION_PUBLIC_KEY"`
	SettingsRateLimit int    `env:"SETTINGS_RATE_LIMIT"`
}

// SessionIssuer is accounts' issuer of session tokens (accounts'
// server.SessionIssuer, as analytics names it).
const SessionIssuer = "svc-accounts"

// Defaults.
const (
	DefaultAdminRateLimit  = 1200
	DefaultSaleRateLimit   = 120
	DefaultFailedAuthLimit = 30
	// DefaultSettingsRateLimit is the console routes' requests per minute
	// per sign-in token (accounts' settings routes' default).
	DefaultSettingsRateLimit = 30
	DefaultApproveInterval   = 30 * time.Second
	DefaultBackstopInterval  = time.Minute
	DefaultBackstopGrace     = time.Minute
	// DefaultAttributionTimeout is attribution.DefaultTimeout: tracking
	// decides in one transaction, far below it when healthy.
	DefaultAttributionTimeout = 5 * time.Second
)

// LoadConfig reads and validates commissions' configuration from env in
// one place; every problem is reported at once.
func LoadConfig(env *obs.Env) (Config, error) {
	c := Config{
		AdminToken:          env.Token("ADMIN_TOKEN"),
		AdminRateLimit:      env.Int("ADMIN_RATE_LIMIT", DefaultAdminRateLimit),
		FailedAuthRateLimit: env.Int("FAILED_AUTH_RATE_LIMIT", DefaultFailedAuthLimit),
		SaleRateLimit:       env.Int("TRACK_SALE_RATE_LIMIT", DefaultSaleRateLimit),
		APIKeyDocsURL:       env.String("API_KEY_DOCS_URL", apikey.DefaultDocsURL),
		KeyUseInterval:      env.Duration("KEY_USE_REPORT_INTERVAL", catalogsync.DefaultKeyUseInterval),
		ApproveInterval:     env.Duration("APPROVE_INTERVAL", DefaultApproveInterval),
		BackstopInterval:    env.Duration("BACKSTOP_INTERVAL", DefaultBackstopInterval),
		BackstopGrace:       env.Duration("BACKSTOP_GRACE", DefaultBackstopGrace),
		TrackingURL:         env.String("TRACKING_URL", ""),
		InternalToken:       env.Token("INTERNAL_TOKEN"),
		AttributionTimeout:  env.Duration("ATTRIBUTION_TIMEOUT", DefaultAttributionTimeout),

		ProcessorWebhookSecret:         env.String("PROCESSOR_WEBHOOK_SECRET", ""),
		ProcessorWebhookSecretPrevious: env.String("PROCESSOR_WEBHOOK_SECRET_PREVIOUS", ""),
		ProcessorPlatformAccount:       env.String("PROCESSOR_PLATFORM_ACCOUNT", ""),

		SessionPublicKey:  env.String("SESSION_PUBLIC_KEY", ""),
		SettingsRateLimit: env.Int("SETTINGS_RATE_LIMIT", DefaultSettingsRateLimit),
	}
	if c.SessionPublicKey != "" {
		if _, err := session.ParsePublicKey(c.SessionPublicKey); err != nil {
			env.Fail(fmt.Errorf("SESSION_PUBLIC_KEY: %w", err))
		}
	}
	if c.ProcessorWebhookSecret == "" && c.ProcessorWebhookSecretPrevious != "" {
		env.Fail(fmt.Errorf("PROCESSOR_WEBHOOK_SECRET_PREVIOUS is set without PROCESSOR_WEBHOOK_SECRET"))
	}
	for name, d := range map[string]time.Duration{
		"APPROVE_INTERVAL": c.ApproveInterval, "BACKSTOP_INTERVAL": c.BackstopInterval, "ATTRIBUTION_TIMEOUT": c.AttributionTimeout,
		"KEY_USE_REPORT_INTERVAL": c.KeyUseInterval,
	} {
		if d <= 0 {
			env.Fail(fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if u, err := url.Parse(c.APIKeyDocsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		env.Fail(fmt.Errorf("API_KEY_DOCS_URL: %q is not an http(s) URL", c.APIKeyDocsURL))
	}
	if c.BackstopGrace < 0 {
		env.Fail(fmt.Errorf("BACKSTOP_GRACE must not be negative, got %s", c.BackstopGrace))
	}
	if err := env.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}
