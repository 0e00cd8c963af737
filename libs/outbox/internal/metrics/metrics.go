// Package metrics registers collectors on an injected registerer.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns the collector to use: c itself, or
// the identical collector registered earlier (two relays or consumers of one
// process share their series instead of failing to start). A nil reg means
// metrics are not exported.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// RegisterInto is Register for building several collectors in a row: after
// the first failure it does nothing, and the failure is left in *errp.
func RegisterInto[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if *errp != nil {
		return c
	}
	got, err := Register(reg, c)
	if err != nil {
		*errp = err
	}
	return got
}
