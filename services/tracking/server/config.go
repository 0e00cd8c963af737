package server

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/httpapi"
)

// Config is the whole of tracking's own configuration: every variable the
// service reads besides the platform's common ones (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, LOG_LEVEL, TRUSTED_PROXIES, OTEL_*; see libs/platform). Each
// field names its variable in its env tag; LoadConfig reads them (each with
// its default) and nothing else does. The README's
// configuration table is checked against these tags by a test.
type Config struct {
	// GeoIPDB is the path of a MaxMind .mmdb; empty: click geo fields stay
	// empty.
	GeoIPDB string `env:"GEOIP_DB"`
	// APIKeyDocsURL is the docs_url of key rotation warnings.
	APIKeyDocsURL string `env:"API_KEY_DOCS_URL"`
	// Per-minute rate limits per client IP (the spec's Limits table; the
	// sale route's per-key limit, TRACK_SALE_RATE_LIMIT, is the commissions
	// service's).
	ClickRateLimit  int `env:"TRACK_CLICK_RATE_LIMIT"`
	LeadRateLimit   int `env:"TRACK_LEAD_RATE_LIMIT"`
	VisitRateLimit  int `env:"TRACK_VISIT_RATE_LIMIT"`
	ConfigRateLimit int `env:"TRACK_CONFIG_RATE_LIMIT"`
	// CORS preflights (OPTIONS on the four routes, one bucket) per minute
	// per client IP, checked before the origin is looked up.
	PreflightRateLimit int `env:"TRACK_PREFLIGHT_RATE_LIMIT"`
	// ClickWriters commit click groups in parallel; ClickGroupMax caps the
	// clicks of one group's transaction.
	ClickWriters  int `env:"CLICK_WRITERS"`
	ClickGroupMax int `env:"CLICK_GROUP_MAX"`
	// InternalToken authenticates the other services (commissions) on the
	// /internal/v1 routes; empty: they answer 503. A secret: never logged,
	// hashed by wire and handed on only as its hash.
	InternalToken string `env:"INTERNAL_TOKEN"`
	// KeyUseInterval is how often the keys that authenticated are reported
	// to accounts (the console's last use of a key).
	KeyUseInterval time.Duration `env:"KEY_USE_REPORT_INTERVAL"`
}

// LoadConfig reads Config from env (every problem at once, with the
// platform's) and validates it, the same way every service does: one read
// per variable with its default, here and nowhere else.
func LoadConfig(env *obs.Env) (Config, error) {
	cfg := Config{
		GeoIPDB:            env.String("GEOIP_DB", ""),
		APIKeyDocsURL:      env.String("API_KEY_DOCS_URL", apikey.DefaultDocsURL),
		ClickRateLimit:     env.Int("TRACK_CLICK_RATE_LIMIT", 60),
		LeadRateLimit:      env.Int("TRACK_LEAD_RATE_LIMIT", 30),
		VisitRateLimit:     env.Int("TRACK_VISIT_RATE_LIMIT", 120),
		ConfigRateLimit:    env.Int("TRACK_CONFIG_RATE_LIMIT", 60),
		PreflightRateLimit: env.Int("TRACK_PREFLIGHT_RATE_LIMIT", httpapi.DefaultPreflightLimit),
		ClickWriters:       env.Int("CLICK_WRITERS", 2),
		ClickGroupMax:      env.Int("CLICK_GROUP_MAX", 64),
		InternalToken:      env.Token("INTERNAL_TOKEN"),
		KeyUseInterval:     env.Duration("KEY_USE_REPORT_INTERVAL", catalogsync.DefaultKeyUseInterval),
	}
	if err := env.Err(); err != nil {
		return Config{}, err
	}
	return cfg, cfg.validate()
}

func (c Config) validate() error {
	var errs []error
	for _, x := range []struct {
		name string
		v    int
	}{
		{"TRACK_CLICK_RATE_LIMIT", c.ClickRateLimit}, {"TRACK_LEAD_RATE_LIMIT", c.LeadRateLimit},
		{"TRACK_VISIT_RATE_LIMIT", c.VisitRateLimit}, {"TRACK_CONFIG_RATE_LIMIT", c.ConfigRateLimit},
		{"TRACK_PREFLIGHT_RATE_LIMIT", c.PreflightRateLimit},
		{"CLICK_WRITERS", c.ClickWriters}, {"CLICK_GROUP_MAX", c.ClickGroupMax},
	} {
		if x.v < 1 {
			errs = append(errs, fmt.Errorf("%s: %d is not a positive number", x.name, x.v))
		}
	}
	if c.KeyUseInterval <= 0 {
		errs = append(errs, fmt.Errorf("KEY_USE_REPORT_INTERVAL must be positive, got %s", c.KeyUseInterval))
	}
	if u, err := url.Parse(c.APIKeyDocsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("API_KEY_DOCS_URL: %q is not an http(s) URL", c.APIKeyDocsURL))
	}
	return errors.Join(errs...)
}
