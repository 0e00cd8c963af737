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
// with secrets masked: the values of keys containing TOKEN, SECRET, PASSWORD
// or KEY are replaced (unset ones stay visibly empty), and passwords inside
// URLs (DATABASE_URL) are masked.
func LogConfig(logger *slog.Logger, cfg map[string]string) {
	attrs := make([]slog.Attr, 0, len(cfg))
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		attrs = append(attrs, slog.String(k, MaskConfigValue(k, cfg[k])))
	}
	logger.LogAttrs(context.Background(), slog.LevelInfo, "config", slog.Any("config", slog.GroupValue(attrs...)))
}

// MaskConfigValue returns value as safe to log for config key.
func MaskConfigValue(key, value string) string {
	if value == "" {
		return ""
	}
	k := strings.ToUpper(key)
	for _, s := range [...]string{"TOKEN", "SECRET", "PASSWORD", "KEY"} {
		if strings.Contains(k, s) {
			return Masked
		}
	}
	return RedactString(value)
}
