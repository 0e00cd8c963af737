package server

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"

	"github.com/svc-dev/svc/libs/obs"
)

// Config is the whole of tracking's own configuration: every variable the
// service reads besides the platform's common ones (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, LOG_LEVEL, TRUSTED_PROXIES, OTEL_*; see libs/platform). Each
// field names its variable in its env tag and its default in its default
// tag; LoadConfig reads them and nothing else does. The README's
// configuration table is checked against these tags by a test.
type Config struct {
	// GeoIPDB is the path of a MaxMind .mmdb; empty: click geo fields stay
	// empty.
	GeoIPDB string `env:"GEOIP_DB" default:""`
	// APIKeyDocsURL is the docs_url of key rotation warnings.
	APIKeyDocsURL string `env:"API_KEY_DOCS_URL" default:"https://docs.svc.dev/api-keys/rotation"`
	// Per-minute rate limits (the spec's Limits table): per client IP, and
	// for the sale route per API key.
	ClickRateLimit  int `env:"TRACK_CLICK_RATE_LIMIT" default:"60"`
	LeadRateLimit   int `env:"TRACK_LEAD_RATE_LIMIT" default:"30"`
	VisitRateLimit  int `env:"TRACK_VISIT_RATE_LIMIT" default:"120"`
	ConfigRateLimit int `env:"TRACK_CONFIG_RATE_LIMIT" default:"60"`
	SaleRateLimit   int `env:"TRACK_SALE_RATE_LIMIT" default:"120"`
	// ProcessorWebhookSecret signs payment-processor deliveries; empty: the
	// webhook route is not served. A secret: never logged.
	ProcessorWebhookSecret string `env:"PROCESSOR_WEBHOOK_SECRET" default:""`
	// ClickWriters commit click groups in parallel; ClickGroupMax caps the
	// clicks of one group's transaction.
	ClickWriters  int `env:"CLICK_WRITERS" default:"2"`
	ClickGroupMax int `env:"CLICK_GROUP_MAX" default:"64"`
}

// LoadConfig reads Config from env (every problem at once, with the
// platform's) and validates it.
func LoadConfig(env *obs.Env) (Config, error) {
	var cfg Config
	v := reflect.ValueOf(&cfg).Elem()
	for i, f := range reflect.VisibleFields(v.Type()) {
		name, def := f.Tag.Get("env"), f.Tag.Get("default")
		switch f.Type.Kind() {
		case reflect.String:
			v.Field(i).SetString(env.String(name, def))
		case reflect.Int:
			d, err := strconv.Atoi(def)
			if err != nil {
				return Config{}, fmt.Errorf("config: default of %s: %w", name, err)
			}
			v.Field(i).SetInt(int64(env.Int(name, d)))
		default:
			return Config{}, fmt.Errorf("config: %s has unsupported type %s", name, f.Type)
		}
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
		{"TRACK_SALE_RATE_LIMIT", c.SaleRateLimit}, {"CLICK_WRITERS", c.ClickWriters}, {"CLICK_GROUP_MAX", c.ClickGroupMax},
	} {
		if x.v < 1 {
			errs = append(errs, fmt.Errorf("%s: %d is not a positive number", x.name, x.v))
		}
	}
	if u, err := url.Parse(c.APIKeyDocsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("API_KEY_DOCS_URL: %q is not an http(s) URL", c.APIKeyDocsURL))
	}
	return errors.Join(errs...)
}

// envNames lists the variables of Config, in field order.
func envNames() []string {
	t := reflect.TypeFor[Config]()
	names := make([]string, 0, t.NumField())
	for _, f := range reflect.VisibleFields(t) {
		names = append(names, f.Tag.Get("env"))
	}
	return names
}
