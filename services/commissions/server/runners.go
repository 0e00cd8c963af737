package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/processor"
	"github.com/svc-dev/svc/services/commissions/internal/track"
)

// BackstopBatch is how many undecided sales one backstop run decides.
const BackstopBatch = 500

// runnerMetrics are the approval scheduler's and the backstop's metrics
// (and the refunds' counter, fed by the ledger's OnRefund).
type runnerMetrics struct {
	approved        prometheus.Counter
	approvalRuns    *prometheus.CounterVec
	oldestDue       prometheus.Gauge
	backlog         prometheus.Gauge
	backstopRuns    *prometheus.CounterVec
	backstopCreated prometheus.Counter
	refunds         *prometheus.CounterVec
	reserved        *prometheus.CounterVec
	// processorEvents counts the processor's webhook deliveries by outcome
	// (not a runner's, but registered with the service's other counters).
	processorEvents *prometheus.CounterVec
	// waiting and waitingOldest: the processor's refunds and disputes kept
	// until their payment is recorded, measured at each backstop run.
	waiting       prometheus.Gauge
	waitingOldest prometheus.Gauge
}

// Refund outcomes, every one pre-declared so a rate over it starts at 0.
var refundOutcomes = []string{"reversed", "refunded", "skipped", ledger.OutcomeNoCommission}

func newRunnerMetrics(reg prometheus.Registerer) (*runnerMetrics, error) {
	m := &runnerMetrics{
		approved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commissions_approved_total", Help: "Pending commissions approved (and credited) by the approval scheduler or the approve-due route.",
		}),
		approvalRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commissions_approval_runs_total", Help: "Approval runs by outcome (ok, error).",
		}, []string{"outcome"}),
		oldestDue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "commissions_oldest_due_pending_seconds",
			Help: "How long the oldest pending commission whose hold has ended has been due, measured before each approval run: the scheduler's lag.",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "commissions_backstop_backlog", Help: "Sales older than BACKSTOP_GRACE whose commission is still undecided, measured at each backstop run.",
		}),
		backstopRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commissions_backstop_runs_total", Help: "Backstop runs by outcome (ok; error: the scan failed).",
		}, []string{"outcome"}),
		backstopCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commissions_backstop_created_total", Help: "Sale commissions the backstop created.",
		}),
		refunds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commissions_refunds_total", Help: "Applied refund calls by outcome (reversed, refunded, skipped, no_commission).",
		}, []string{"outcome"}),
		reserved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commissions_backstop_reserved_total",
			Help: "Reserved sales (their process died between reservation and record) the backstop decided again, by outcome (completed, released, failed).",
		}, []string{"outcome"}),
		processorEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commissions_processor_events_total",
			Help: "Payment processor webhook deliveries handled, by outcome (sale_recorded, duplicate_event, unknown_account, test_mode_event, stored, …).",
		}, []string{"outcome"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "commissions_processor_waiting_events",
			Help: "Processor refund and dispute events kept (awaiting_payment) until the payment they name is recorded, measured at each backstop run.",
		}),
		waitingOldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "commissions_processor_waiting_oldest_seconds",
			Help: "How long the oldest processor event awaiting its payment has waited (0: none), measured at each backstop run.",
		}),
	}
	for _, c := range []prometheus.Collector{m.approved, m.approvalRuns, m.oldestDue, m.backlog, m.backstopRuns, m.backstopCreated, m.refunds, m.reserved, m.processorEvents, m.waiting, m.waitingOldest} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range []string{"ok", "error"} {
		m.approvalRuns.WithLabelValues(o)
		m.backstopRuns.WithLabelValues(o)
	}
	for _, o := range refundOutcomes {
		m.refunds.WithLabelValues(o)
	}
	for _, o := range []string{"completed", "released", "failed"} {
		m.reserved.WithLabelValues(o)
	}
	for _, o := range []string{"sale_recorded", "refund_applied", "awaiting_payment", "dispute_lost", "duplicate_event", "unknown_account", "test_mode_event", "stored"} {
		m.processorEvents.WithLabelValues(o)
	}
	return m, nil
}

// runners are commissions' background loops on the injected clock: each
// run reads now from it; the interval between runs is real time.
type runners struct {
	ledger    *ledger.Service
	track     *track.Service
	processor *processor.Service
	now       func() time.Time
	logger    *slog.Logger
	metrics   *runnerMetrics
	cfg       Config
}

// every calls fn now and then every interval until ctx ends. A failed run
// is logged and counted by fn and retried at the next tick: the loop never
// stops the service.
func every(ctx context.Context, interval time.Duration, fn func(context.Context)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// approve is one run of the approval scheduler: it measures the lag, then
// approves every commission whose hold ended (ApproveDue locks with SKIP
// LOCKED, so replicas share the work). It returns how many it approved.
func (r *runners) approve(ctx context.Context) (int, error) {
	now := r.now().UTC()
	if lag, err := r.ledger.ApprovalLag(ctx, now); err != nil {
		r.logger.WarnContext(ctx, "approval lag", "err", err)
	} else {
		r.metrics.oldestDue.Set(lag.Seconds())
	}
	n, err := r.ledger.ApproveDue(ctx, now)
	r.metrics.approved.Add(float64(n))
	if err != nil {
		r.metrics.approvalRuns.WithLabelValues("error").Inc()
		return n, err
	}
	r.metrics.approvalRuns.WithLabelValues("ok").Inc()
	if n > 0 {
		r.logger.InfoContext(ctx, "commissions approved", "count", n)
	}
	return n, nil
}

// approveLoop is the approval scheduler.
func (r *runners) approveLoop(ctx context.Context) error {
	return every(ctx, r.cfg.ApproveInterval, func(ctx context.Context) {
		if _, err := r.approve(ctx); err != nil && ctx.Err() == nil {
			r.logger.ErrorContext(ctx, "approval run failed", "err", err)
		}
	})
}

// backstop is one backstop run. First the sales reserved before the grace
// (their process died between the reservation and the record) are decided
// again with tracking; then the sales older than the grace whose
// commission is undecided (RecordSale could not read the program's terms)
// are decided by EnsureCommission, one transaction each. Between the two,
// the processor's refunds and disputes kept waiting for a payment that is
// recorded before the grace are applied.
func (r *runners) backstop(ctx context.Context) {
	olderThan := r.now().UTC().Add(-r.cfg.BackstopGrace)
	if reserved, err := r.ledger.ReservedSales(ctx, olderThan, BackstopBatch); err != nil {
		if ctx.Err() == nil {
			r.logger.ErrorContext(ctx, "backstop scan of reserved sales failed", "err", err)
		}
	} else if len(reserved) > 0 {
		res := r.track.Resolve(ctx, reserved)
		r.metrics.reserved.WithLabelValues("completed").Add(float64(res.Completed))
		r.metrics.reserved.WithLabelValues("released").Add(float64(res.Released))
		r.metrics.reserved.WithLabelValues("failed").Add(float64(res.Failed))
		r.logger.InfoContext(ctx, "backstop decided reserved sales", "completed", res.Completed, "released", res.Released, "failed", res.Failed)
	}
	if n, err := r.ledger.BackstopBacklog(ctx, olderThan); err != nil {
		r.logger.WarnContext(ctx, "backstop backlog", "err", err)
	} else {
		r.metrics.backlog.Set(float64(n))
	}
	if n, err := r.ledger.NotifyPending(ctx, olderThan, BackstopBatch); err != nil && ctx.Err() == nil {
		r.logger.WarnContext(ctx, "backstop could not send refund notifications", "sent", n, "err", err)
	} else if n > 0 {
		r.logger.InfoContext(ctx, "backstop sent pending refund notifications", "refunds", n)
	}
	if n, err := r.processor.RetryWaiting(ctx, olderThan, BackstopBatch); err != nil && ctx.Err() == nil {
		r.logger.WarnContext(ctx, "backstop could not apply waiting processor refunds", "applied", n, "err", err)
	} else if n > 0 {
		r.logger.InfoContext(ctx, "backstop applied processor refunds and disputes whose payment is now recorded", "events", n)
	}
	if n, oldest, err := r.processor.WaitingStats(ctx); err != nil {
		r.logger.WarnContext(ctx, "backstop could not count waiting processor events", "err", err)
	} else {
		r.metrics.waiting.Set(float64(n))
		age := 0.0
		if !oldest.IsZero() {
			age = r.now().Sub(oldest).Seconds()
		}
		r.metrics.waitingOldest.Set(age)
	}
	ids, err := r.ledger.SalesWithoutCommission(ctx, olderThan, BackstopBatch)
	if err != nil {
		if ctx.Err() == nil {
			r.metrics.backstopRuns.WithLabelValues("error").Inc()
			r.logger.ErrorContext(ctx, "backstop scan failed", "err", err)
		}
		return
	}
	// Counted once the run is over, so a test (or an operator) reading it
	// knows every sale of the run was tried.
	defer r.metrics.backstopRuns.WithLabelValues("ok").Inc()
	decided, failed := 0, 0
	var firstFailed int64
	var firstErr error
	for _, id := range ids {
		res, err := r.ledger.EnsureCommission(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// One line per run, not per sale: a program missing from the
			// replica fails every one of its sales at every run.
			if failed == 0 {
				firstFailed, firstErr = id, err
			}
			failed++
			continue
		}
		if !res.Decided {
			continue
		}
		decided++
		if res.State == ledger.StateCreated && res.Commission != nil {
			r.metrics.backstopCreated.Inc()
			r.logger.InfoContext(ctx, "backstop created a commission", "sale_id", id,
				"commission_id", res.Commission.ID, "program_id", res.Commission.ProgramID)
		} else {
			r.logger.InfoContext(ctx, "backstop decided a sale without commission", "sale_id", id, "state", res.State)
		}
	}
	if failed > 0 {
		r.logger.WarnContext(ctx, "backstop could not decide sales", "count", failed, "sale_id", firstFailed, "err", firstErr)
	}
	if decided > 0 {
		// The backlog shrank by what was decided.
		if n, err := r.ledger.BackstopBacklog(ctx, olderThan); err == nil {
			r.metrics.backlog.Set(float64(n))
		}
	}
}

// backstopLoop runs the backstop every BACKSTOP_INTERVAL.
func (r *runners) backstopLoop(ctx context.Context) error {
	return every(ctx, r.cfg.BackstopInterval, r.backstop)
}
