package server

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth/oidcverify"
	"github.com/svc-dev/svc/services/accounts/internal/dashauth"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
	"github.com/svc-dev/svc/services/accounts/internal/processorconnect"
	"github.com/svc-dev/svc/services/accounts/internal/sessions"
)

// Config is accounts' whole configuration: every variable the service reads
// besides the platform's common ones (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, LOG_LEVEL, TRUSTED_PROXIES, OTEL_*, …: libs/platform). The
// env tag names each field's variable; LoadConfig reads them all, and the
// README's Configuration table is checked against the tags
// (config_test.go). Wire reads nothing but this struct.
type Config struct {
	// Admin API and dashboard sessions.
	AdminToken        string        `env:"ADMIN_TOKEN"`         // required, secret
	SessionSigningKey string        `env:"SESSION_SIGNING_KEY"` // required, secret: base64 Ed25519 seed
	SessionTTL        time.Duration `env:"SESSION_TTL"`
	CatalogConsumers  []string      `env:"CATALOG_CONSUMERS"`

	// Request limits per minute.
	AdminRateLimit    int `env:"ADMIN_RATE_LIMIT"`
	CLIRateLimit      int `env:"CLI_RATE_LIMIT"`
	SettingsRateLimit int `env:"SETTINGS_RATE_LIMIT"`
	// Failed authentications (401s) per minute per client IP (IPv6: its
	// /64) on every route that checks a token; past it, 429 before any
	// lookup.
	FailedAuthRateLimit int `env:"FAILED_AUTH_RATE_LIMIT"`

	// Command-line sign-in.
	OIDC                OIDCConfig
	CLILoginRedirectURL string        `env:"CLI_LOGIN_REDIRECT_URL"`
	CLITokenTTL         time.Duration `env:"CLI_TOKEN_TTL"`

	// The dashboard's browser sign-in (same OpenID provider). PublicURL is
	// the site's address as browsers see it: the provider posts the
	// id_token to PublicURL + /api/v1/dashboard/auth/callback. DashboardURL
	// is the path a sign-in without return_to lands on.
	PublicURL    string `env:"PUBLIC_URL"`
	DashboardURL string `env:"DASHBOARD_URL"`
	// Signup is who may become a user by signing in to the dashboard:
	// open (anyone with a verified email gets a user and a workspace) or
	// invite (people who have a user already). Invite unless set: a
	// server is not open to the world by accident.
	Signup identity.Signup `env:"SIGNUP"`

	// Command-line status and test events.
	TrackingURL string `env:"TRACKING_URL"`
	// CommissionsURL is where test sales go: the commissions service serves
	// POST /api/v1/track/sale.
	CommissionsURL string `env:"COMMISSIONS_URL"`
	// AnalyticsURL is analytics' operations address: the console's
	// partners list asks it for the page's figures with InternalToken.
	AnalyticsURL         string        `env:"ANALYTICS_URL"`
	InternalToken        string        `env:"INTERNAL_TOKEN"` // secret
	TrackingTimeout      time.Duration `env:"TRACKING_TIMEOUT"`
	ChainLimitPerHour    int           `env:"CHAIN_LIMIT_PER_HOUR"`
	TestEventSyncTimeout time.Duration `env:"TEST_EVENT_SYNC_TIMEOUT"`
	// SignOutSyncTimeout bounds how long a sign-out waits for every catalog
	// replica to hold the revocation before it answers (it answers anyway,
	// logged, when one lags).
	SignOutSyncTimeout time.Duration `env:"SIGNOUT_SYNC_TIMEOUT"`
	APIKeyDocsURL      string        `env:"API_KEY_DOCS_URL"`
	// KeyUseInterval is how often the keys that worked on the CLI routes
	// are reported (apikeys.used.v1, consumed back here for the console's
	// last use), as tracking, commissions and analytics report theirs.
	KeyUseInterval time.Duration `env:"KEY_USE_REPORT_INTERVAL"`

	// The console's payment processor connection (OAuth): all of the
	// client id, secret and API address, or none (connect answers 503).
	ProcessorClientID   string        `env:"PROCESSOR_CONNECT_CLIENT_ID"`
	ProcessorSecret     string        `env:"PROCESSOR_CONNECT_SECRET"` // secret: the platform's secret key
	ProcessorAPIURL     string        `env:"PROCESSOR_API_URL"`
	ProcessorConnectURL string        `env:"PROCESSOR_CONNECT_URL"`
	ProcessorStateTTL   time.Duration `env:"PROCESSOR_CONNECT_STATE_TTL"`
}

// OIDCConfig is the OpenID provider the command-line sign-in trusts. None
// of it set means sign-in is off (Enabled false; its routes answer 503) so
// a stack without a provider still starts. OIDC_ISSUER and OIDC_AUDIENCE
// are required otherwise; OIDC_AUTH_URL, and the keys when neither
// OIDC_JWKS_URL nor OIDC_JWKS_FILE is set, come from the issuer's discovery
// document (discoverOIDC, at start).
type OIDCConfig struct {
	Issuer     string   `env:"OIDC_ISSUER"`
	Audience   string   `env:"OIDC_AUDIENCE"`
	JWKSURL    string   `env:"OIDC_JWKS_URL"`
	JWKSFile   string   `env:"OIDC_JWKS_FILE"`
	AuthURL    string   `env:"OIDC_AUTH_URL"`
	Algorithms []string `env:"OIDC_SIGNING_ALGS"`
	Enabled    bool     // any OIDC_* variable but OIDC_SIGNING_ALGS set, and valid
}

// Defaults.
const (
	DefaultSessionTTL        = 12 * time.Hour
	DefaultAdminRateLimit    = 1200
	DefaultCLIRateLimit      = 60
	DefaultSettingsRateLimit = 30
	DefaultFailedAuthLimit   = 30
	DefaultTrackingTimeout   = 10 * time.Second
	DefaultDashboardURL      = "/dashboard/"
)

// LoadConfig reads and validates accounts' configuration from env in one
// place. Every problem is reported at once (obs.Env collects them).
func LoadConfig(env *obs.Env) (Config, error) {
	c := Config{
		AdminToken:        env.RequiredToken("ADMIN_TOKEN"),
		SessionSigningKey: env.Required("SESSION_SIGNING_KEY"),
		SessionTTL:        env.Duration("SESSION_TTL", DefaultSessionTTL),
		CatalogConsumers:  env.List("CATALOG_CONSUMERS", nil),

		AdminRateLimit:      env.Int("ADMIN_RATE_LIMIT", DefaultAdminRateLimit),
		CLIRateLimit:        env.Int("CLI_RATE_LIMIT", DefaultCLIRateLimit),
		SettingsRateLimit:   env.Int("SETTINGS_RATE_LIMIT", DefaultSettingsRateLimit),
		FailedAuthRateLimit: env.Int("FAILED_AUTH_RATE_LIMIT", DefaultFailedAuthLimit),

		OIDC: OIDCConfig{
			Issuer:     env.String("OIDC_ISSUER", ""),
			Audience:   env.String("OIDC_AUDIENCE", ""),
			JWKSURL:    env.String("OIDC_JWKS_URL", ""),
			JWKSFile:   env.String("OIDC_JWKS_FILE", ""),
			AuthURL:    env.String("OIDC_AUTH_URL", ""),
			Algorithms: env.List("OIDC_SIGNING_ALGS", oidcverify.DefaultAlgorithms),
		},
		CLILoginRedirectURL: env.String("CLI_LOGIN_REDIRECT_URL", ""),
		CLITokenTTL:         env.Duration("CLI_TOKEN_TTL", cliauth.DefaultTokenTTL),
		PublicURL:           strings.TrimRight(env.String("PUBLIC_URL", ""), "/"),
		DashboardURL:        env.String("DASHBOARD_URL", DefaultDashboardURL),
		Signup:              identity.Signup(env.String("SIGNUP", string(identity.SignupInvite))),

		TrackingURL:          env.String("TRACKING_URL", ""),
		CommissionsURL:       env.String("COMMISSIONS_URL", ""),
		AnalyticsURL:         env.String("ANALYTICS_URL", ""),
		InternalToken:        env.Token("INTERNAL_TOKEN"),
		TrackingTimeout:      env.Duration("TRACKING_TIMEOUT", DefaultTrackingTimeout),
		ChainLimitPerHour:    env.Int("CHAIN_LIMIT_PER_HOUR", integration.DefaultChainLimit),
		TestEventSyncTimeout: env.Duration("TEST_EVENT_SYNC_TIMEOUT", integration.DefaultSyncTimeout),
		SignOutSyncTimeout:   env.Duration("SIGNOUT_SYNC_TIMEOUT", sessions.DefaultPropagationTimeout),
		APIKeyDocsURL:        env.String("API_KEY_DOCS_URL", apikey.DefaultDocsURL),
		KeyUseInterval:       env.Duration("KEY_USE_REPORT_INTERVAL", catalogsync.DefaultKeyUseInterval),

		ProcessorClientID: env.String("PROCESSOR_CONNECT_CLIENT_ID", ""),
		ProcessorSecret:   env.String("PROCESSOR_CONNECT_SECRET", ""),
		ProcessorAPIURL:   strings.TrimRight(env.String("PROCESSOR_API_URL", ""), "/"),
		ProcessorStateTTL: env.Duration("PROCESSOR_CONNECT_STATE_TTL", processorconnect.DefaultStateTTL),
	}
	// The processor's OAuth host, when it is not its API's.
	c.ProcessorConnectURL = strings.TrimRight(env.String("PROCESSOR_CONNECT_URL", c.ProcessorAPIURL), "/")
	c.validateProcessor(env)
	c.OIDC.Enabled = c.OIDC.validate(env)
	if _, err := dashauth.SafeReturnTo(c.DashboardURL); err != nil {
		env.Fail(fmt.Errorf("DASHBOARD_URL must be a path on this site under /dashboard/, got %q", c.DashboardURL))
	}
	if _, err := identity.ParseSignup(string(c.Signup)); err != nil {
		env.Fail(fmt.Errorf("SIGNUP %w", err))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "" {
			env.Fail(fmt.Errorf("PUBLIC_URL must be an http(s) address without a path, like https://app.example.com, got %q", c.PublicURL))
		}
	}
	if c.KeyUseInterval <= 0 {
		env.Fail(fmt.Errorf("KEY_USE_REPORT_INTERVAL must be positive, got %s", c.KeyUseInterval))
	}
	if c.ChainLimitPerHour < 1 {
		env.Fail(fmt.Errorf("CHAIN_LIMIT_PER_HOUR must be at least 1, got %d", c.ChainLimitPerHour))
	}
	if err := env.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ProcessorEnabled is whether the console may connect a payment processor.
func (c Config) ProcessorEnabled() bool { return c.ProcessorClientID != "" }

// validateProcessor wants the connection's settings all or none, http(s)
// addresses, and PUBLIC_URL (the callback the processor sends people to).
func (c Config) validateProcessor(env *obs.Env) {
	if c.ProcessorStateTTL <= 0 {
		env.Fail(fmt.Errorf("PROCESSOR_CONNECT_STATE_TTL must be positive, got %s", c.ProcessorStateTTL))
	}
	if c.ProcessorClientID == "" && c.ProcessorSecret == "" && c.ProcessorAPIURL == "" {
		return
	}
	if c.ProcessorClientID == "" || c.ProcessorSecret == "" || c.ProcessorAPIURL == "" {
		env.Fail(errors.New("set all of PROCESSOR_CONNECT_CLIENT_ID, PROCESSOR_CONNECT_SECRET and PROCESSOR_API_URL, or none"))
		return
	}
	for k, v := range map[string]string{"PROCESSOR_API_URL": c.ProcessorAPIURL, "PROCESSOR_CONNECT_URL": c.ProcessorConnectURL} {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			env.Fail(fmt.Errorf("%s must be an http(s) address, got %q", k, v))
		}
	}
	if c.PublicURL == "" {
		env.Fail(errors.New("PUBLIC_URL is required when PROCESSOR_CONNECT_CLIENT_ID is set: the processor sends people back to PUBLIC_URL/api/v1/processor/connect/callback"))
	}
}

var errJWKSChoice = errors.New("set exactly one of OIDC_JWKS_URL and OIDC_JWKS_FILE")

// validate reports whether sign-in is configured and recorded in env what
// is wrong with a partial configuration.
func (o OIDCConfig) validate(env *obs.Env) bool {
	if o.Issuer == "" && o.Audience == "" && o.JWKSURL == "" && o.JWKSFile == "" && o.AuthURL == "" {
		return false
	}
	var missing []error
	if o.Issuer == "" {
		missing = append(missing, errors.New("OIDC_ISSUER is required when command-line sign-in is configured"))
	}
	if o.Audience == "" {
		missing = append(missing, errors.New("OIDC_AUDIENCE is required when command-line sign-in is configured"))
	}
	// Both set is ambiguous; neither is left to discovery, which needs the
	// issuer.
	if (o.JWKSURL != "" && o.JWKSFile != "") || (o.JWKSURL == "" && o.JWKSFile == "" && o.Issuer == "") {
		missing = append(missing, errJWKSChoice)
	}
	env.Fail(errors.Join(missing...))
	return len(missing) == 0
}
