package apikey

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// LookupCounter counts apikey_lookups_total{outcome}: every store lookup an
// Authenticator makes, by outcome (ok, rotating, retired, invalid, error).
// A flood of guessed keys shows here as invalid lookups; one refused before
// authentication (a failed-auth limit) does not.
type LookupCounter struct {
	vec *prometheus.CounterVec
}

// NewLookupCounter registers apikey_lookups_total on reg; when it is already
// registered there (several authenticators in one process), the existing
// collector is shared.
func NewLookupCounter(reg prometheus.Registerer) (*LookupCounter, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apikey_lookups_total",
		Help: "Program API key store lookups, by outcome.",
	}, []string{"outcome"})
	if err := reg.Register(vec); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register apikey_lookups_total: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("register apikey_lookups_total: existing collector is %T", are.ExistingCollector)
		}
		vec = existing
	}
	return &LookupCounter{vec: vec}, nil
}

// Observe counts one lookup; pass it as Authenticator.OnLookup.
func (c *LookupCounter) Observe(o Outcome) {
	c.vec.WithLabelValues(o.String()).Inc()
}
