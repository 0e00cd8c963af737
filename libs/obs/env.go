package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Env reads typed configuration from environment variables, once, in run().
// Problems are collected instead of returned one by one, so a bad deploy
// reports every wrong variable at once:
//
//	env := obs.NewEnv(os.Getenv)
//	cfg := config{
//		HTTPAddr:    env.String("HTTP_ADDR", ":8080"),
//		DatabaseURL: env.Required("DATABASE_URL"),
//		MaxConns:    env.Int("DB_MAX_CONNS", 32),
//	}
//	if err := env.Err(); err != nil { ... }
//	obs.LogConfig(logger, env.Values())
type Env struct {
	get    func(string) string
	errs   []error
	values map[string]string
}

// NewEnv reads variables through get (os.Getenv in production, a map in
// tests).
func NewEnv(get func(string) string) *Env {
	return &Env{get: get, values: map[string]string{}}
}

func (e *Env) lookup(key, def string) (string, bool) {
	v := strings.TrimSpace(e.get(key))
	if v == "" {
		e.values[key] = def
		return def, false
	}
	e.values[key] = v
	return v, true
}

// String returns the variable or def when unset or blank.
func (e *Env) String(key, def string) string {
	v, _ := e.lookup(key, def)
	return v
}

// Required returns the variable and records an error when it is unset.
func (e *Env) Required(key string) string {
	v, ok := e.lookup(key, "")
	if !ok {
		e.errs = append(e.errs, fmt.Errorf("%s is required", key))
	}
	return v
}

// MinTokenBytes is the shortest shared token a service accepts
// (ADMIN_TOKEN, INTERNAL_TOKEN): 32 bytes, what `openssl rand -base64 32`
// prints at the least. A short token can be guessed, and the routes it
// guards are the whole catalog and ledger; the failed-authentication limit
// slows guessing per address, not across many.
const MinTokenBytes = 32

// Token returns a shared token that callers present as a Bearer token, or ""
// when unset (the routes it guards are then refused). A set token shorter
// than MinTokenBytes is an error naming the variable and its length, never
// its value: the service refuses to start rather than guard routes with it.
func (e *Env) Token(key string) string {
	v, ok := e.lookup(key, "")
	if ok && len(v) < MinTokenBytes {
		e.errs = append(e.errs, fmt.Errorf("%s is %d bytes: a token must be at least %d bytes (e.g. openssl rand -base64 32)", key, len(v), MinTokenBytes))
	}
	return v
}

// RequiredToken is Token for a token the service cannot run without.
func (e *Env) RequiredToken(key string) string {
	v := e.Token(key)
	if v == "" {
		e.errs = append(e.errs, fmt.Errorf("%s is required", key))
	}
	return v
}

// Int returns the variable parsed as a base-10 integer, or def.
func (e *Env) Int(key string, def int) int {
	v, ok := e.lookup(key, strconv.Itoa(def))
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not an integer", key, v))
		return def
	}
	return n
}

// Bool returns the variable parsed by strconv.ParseBool, or def.
func (e *Env) Bool(key string, def bool) bool {
	v, ok := e.lookup(key, strconv.FormatBool(def))
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not a boolean", key, v))
		return def
	}
	return b
}

// Duration returns the variable parsed by time.ParseDuration ("250ms",
// "2s"), or def.
func (e *Env) Duration(key string, def time.Duration) time.Duration {
	v, ok := e.lookup(key, def.String())
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not a duration", key, v))
		return def
	}
	return d
}

// List returns the comma-separated variable split and trimmed, empty items
// dropped, or def.
func (e *Env) List(key string, def []string) []string {
	v, ok := e.lookup(key, strings.Join(def, ","))
	if !ok {
		return def
	}
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Fail records a validation error found by the caller (a value out of range),
// so it is reported with the parse errors.
func (e *Env) Fail(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// Err returns every problem found so far, joined, or nil.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration: %w", errors.Join(e.errs...))
}

// Values returns each variable read and its effective value (defaults
// included), for LogConfig. Values are NOT masked: never log them directly.
func (e *Env) Values() map[string]string {
	return maps.Clone(e.values)
}

// LogConfig logs the effective configuration at info level, sorted by key,
// with secrets masked by MaskConfigValue.
//
// The values go out as one JSON object rather than a group of attributes:
// the logger's Redact masks any attribute whose key merely contains "token"
// or "api_key", which would hide CLI_TOKEN_TTL and API_KEY_DOCS_URL again.
// Every value here has been through MaskConfigValue, whose rule is made for
// variable names, and Redact still checks the line's own attributes.
func LogConfig(logger *slog.Logger, cfg map[string]string) {
	masked := make(map[string]string, len(cfg))
	for k, v := range cfg {
		masked[k] = MaskConfigValue(k, v)
	}
	// encoding/json writes map keys sorted.
	logger.LogAttrs(context.Background(), slog.LevelInfo, "config", slog.Any("config", masked))
}

// secretConfigSuffixes are the last name-parts of variables that hold a
// secret (ADMIN_TOKEN, SESSION_SIGNING_KEY, PROCESSOR_WEBHOOK_SECRET). Only
// the last part counts: CLI_TOKEN_TTL is a lifetime and API_KEY_DOCS_URL a
// link, and their values help whoever reads the config line.
var secretConfigSuffixes = [...]string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIALS"}

// secretConfigNames hold secrets although their last name-part does not say
// so: OTLP exporter headers usually carry the collector's Authorization or
// API key header.
var secretConfigNames = map[string]bool{
	"OTEL_EXPORTER_OTLP_HEADERS":        true,
	"OTEL_EXPORTER_OTLP_TRACES_HEADERS": true,
}

// isSecretConfigKey reports whether the environment variable key holds a
// secret (case-insensitive, '-' read as '_'): its last name-part is one of
// TOKEN, SECRET, PASSWORD, PASSWD, KEY or CREDENTIALS, or it is a known
// secret name; a _PREVIOUS suffix (the value a rotation still accepts) is
// judged by the name it rotates, so ADMIN_TOKEN_PREVIOUS is a secret.
//
// A *_PUBLIC_KEY is not a secret: SESSION_PUBLIC_KEY is the verifying half
// of SESSION_SIGNING_KEY, given to tracking as a plain Helm value
// (global.sessionPublicKey; "accounts keygen" says it is not secret), and
// it lets nobody sign. Showing it lets an operator check which signing key
// a service trusts after a rotation.
//
// Values that are not masked still go through RedactString, which masks the
// password of a URL (DATABASE_URL) or of a keyword DSN.
func isSecretConfigKey(key string) bool {
	k := strings.ReplaceAll(strings.ToUpper(strings.TrimSpace(key)), "-", "_")
	k = strings.TrimSuffix(k, "_PREVIOUS")
	if secretConfigNames[k] {
		return true
	}
	if strings.HasSuffix(k, "_PUBLIC_KEY") {
		return false
	}
	last := k[strings.LastIndexByte(k, '_')+1:]
	return slices.Contains(secretConfigSuffixes[:], last)
}

// MaskConfigValue returns value as safe to log for config key: Masked for a
// secret (isSecretConfigKey), an unset secret staying visibly empty, and
// otherwise the value with URL and DSN passwords masked (RedactString).
func MaskConfigValue(key, value string) string {
	if value == "" {
		return ""
	}
	if isSecretConfigKey(key) {
		return Masked
	}
	return RedactString(value)
}
