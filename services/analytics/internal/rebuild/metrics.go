package rebuild

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports the rebuilds table at each scrape: a rebuild runs as
// its own short-lived process (`analytics rebuild`), which Prometheus
// never scrapes, so the service reports what it recorded.
type Collector struct {
	pool    *pgxpool.Pool
	now     func() time.Time
	logger  *slog.Logger
	success *prometheus.Desc
	failure *prometheus.Desc
	running *prometheus.Desc
}

// NewCollector reads pool's rebuilds table.
func NewCollector(pool *pgxpool.Pool, now func() time.Time, logger *slog.Logger) *Collector {
	return &Collector{
		pool: pool, now: now, logger: logger,
		success: prometheus.NewDesc("analytics_rebuild_last_success_timestamp_seconds", "When the last rebuild that switched generations finished (0: none yet).", nil, nil),
		failure: prometheus.NewDesc("analytics_rebuild_last_failure_timestamp_seconds", "When the last failed rebuild ended (0: none); the live figures were left unchanged.", nil, nil),
		running: prometheus.NewDesc("analytics_rebuild_running_seconds", "How long the oldest rebuild still marked running has run (0: none).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.success
	ch <- c.failure
	ch <- c.running
}

// Collect implements prometheus.Collector; a scrape that cannot read the
// table exports none of the three (the scrape itself still succeeds).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var success, failure, running *time.Time
	err := c.pool.QueryRow(ctx, `SELECT
			(SELECT max(finished_at) FROM rebuilds WHERE status = 'done'),
			(SELECT max(finished_at) FROM rebuilds WHERE status = 'failed'),
			(SELECT min(started_at) FROM rebuilds WHERE status = 'running')`).Scan(&success, &failure, &running)
	if err != nil {
		if c.logger != nil {
			c.logger.Warn("rebuild metrics not read", "err", err)
		}
		return
	}
	stamp := func(t *time.Time) float64 {
		if t == nil {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	age := 0.0
	if running != nil {
		age = c.now().Sub(*running).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(c.success, prometheus.GaugeValue, stamp(success))
	ch <- prometheus.MustNewConstMetric(c.failure, prometheus.GaugeValue, stamp(failure))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, age)
}
