package delivery

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the dispatcher's, under the names the contract fixed.
type metrics struct {
	deliveries *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	lag        prometheus.Histogram
	pending    prometheus.Gauge
	pendingMax prometheus.Gauge
	disabled   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhooks_deliveries_total",
			Help: "Delivery outcomes: delivered (2xx), retried (an attempt failed, another is scheduled), failed (retries over).",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhooks_attempts_total",
			Help: "Delivery attempts by result: the status class, or timeout, connection (no answer) or refused (destination not allowed).",
		}, []string{"result"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "webhooks_delivery_lag_seconds",
			Help:    "From an event's creation to its endpoint's 2xx.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 6 * 3600, 24 * 3600, 72 * 3600},
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhooks_pending_deliveries",
			Help: "Deliveries not yet delivered nor failed, to enabled endpoints.",
		}),
		pendingMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhooks_endpoint_pending_max",
			Help: "The longest one enabled endpoint's queue of pending deliveries.",
		}),
		disabled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhooks_endpoints_disabled_total",
			Help: "Endpoints disabled after failing every attempt for DISABLE_AFTER.",
		}),
	}
	for _, o := range []string{outcomeDelivered, outcomeRetried, outcomeFailed} {
		m.deliveries.WithLabelValues(o)
	}
	for _, r := range []string{Result2xx, Result3xx, Result4xx, Result5xx, ResultTimeout, ResultConnection, ResultRefused} {
		m.attempts.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.deliveries, m.attempts, m.lag, m.pending, m.pendingMax, m.disabled} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

const (
	outcomeDelivered = "delivered"
	outcomeRetried   = "retried"
	outcomeFailed    = "failed"
)
