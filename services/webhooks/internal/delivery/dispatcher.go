package delivery

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config's optional fields.
const (
	DefaultGrace         = 30 * time.Second
	DefaultMaxAge        = 72 * time.Hour
	DefaultGaugeInterval = 5 * time.Second
	// recordTimeout bounds recording an outcome, which happens even while
	// the dispatcher stops (the attempt was made; its answer is kept).
	recordTimeout = 10 * time.Second
)

// Attempter makes one attempt (the Sender).
type Attempter interface {
	Send(ctx context.Context, r Request) Response
}

// Config configures a Dispatcher.
type Config struct {
	Store   Store
	Sender  Attempter
	Secrets Opener
	// Now is the clock every rule reads (due, lease, backoff, MaxAge,
	// DisableAfter, the webhook-timestamp header).
	Now func() time.Time
	// Rand returns a number in [0, 1) for the backoff's jitter; nil is
	// math/rand/v2's Float64.
	Rand       func() float64
	Logger     *slog.Logger
	Registerer prometheus.Registerer

	// Workers is the most attempts at once; EndpointConcurrency the most
	// to one endpoint.
	Workers             int
	EndpointConcurrency int
	// Timeout is the Sender's; a claim's lease is Timeout + Grace.
	Timeout time.Duration
	Grace   time.Duration
	// PollInterval is the time between looks for due deliveries (Wake asks
	// for one sooner); GaugeInterval between refreshes of the pending
	// gauges.
	PollInterval  time.Duration
	GaugeInterval time.Duration
	// DisableAfter disables an endpoint failing every attempt that long;
	// MaxAge ends a delivery's retries (failed) that long after it was
	// created.
	DisableAfter time.Duration
	MaxAge       time.Duration
}

// Dispatcher delivers due deliveries.
type Dispatcher struct {
	cfg  Config
	m    *metrics
	wake chan struct{}

	// pollMu keeps claims one at a time, so the free slots a claim is
	// given are still free when it returns.
	pollMu sync.Mutex

	mu       sync.Mutex
	inflight map[int64]int
	total    int

	wg sync.WaitGroup
}

// New returns a Dispatcher and registers its metrics.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Store == nil || cfg.Sender == nil || cfg.Secrets == nil || cfg.Now == nil {
		return nil, errors.New("delivery: Store, Sender, Secrets and Now are required")
	}
	if cfg.Workers <= 0 || cfg.EndpointConcurrency <= 0 || cfg.Timeout <= 0 || cfg.PollInterval <= 0 || cfg.DisableAfter <= 0 {
		return nil, errors.New("delivery: Workers, EndpointConcurrency, Timeout, PollInterval and DisableAfter must be positive")
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.GaugeInterval <= 0 {
		cfg.GaugeInterval = DefaultGaugeInterval
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Dispatcher{cfg: cfg, m: m, wake: make(chan struct{}, 1), inflight: map[int64]int{}}, nil
}

// Wake asks for a look for due deliveries now (an event was just written
// in this pod); it never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight (cut
// by ctx: left unrecorded, their leases bring them back). Store errors are
// logged and retried at the next poll: they never stop the service.
func (d *Dispatcher) Run(ctx context.Context) error {
	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	gauges := time.NewTicker(d.cfg.GaugeInterval)
	defer gauges.Stop()
	defer d.wg.Wait()
	d.refreshGauges(ctx)
	for {
		more, err := d.claimAndStart(ctx, nil)
		if err != nil && ctx.Err() == nil {
			d.cfg.Logger.Error("claim webhook deliveries", "err", err)
		}
		if more && err == nil && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		case <-d.wake:
		case <-gauges.C:
			d.refreshGauges(ctx)
		}
	}
}

// RunOnce claims what is due now and makes those attempts, returning when
// they are recorded: one deterministic step (tests, tools). It returns how
// many deliveries it attempted.
func (d *Dispatcher) RunOnce(ctx context.Context) (int, error) {
	var wg sync.WaitGroup
	var n int
	_, err := d.claimAndStart(ctx, func(claimed int) {
		n = claimed
		wg.Add(claimed)
	}, &wg)
	wg.Wait()
	return n, err
}

// RefreshGauges reads the queue depth into the pending gauges.
func (d *Dispatcher) RefreshGauges(ctx context.Context) error {
	p, err := d.cfg.Store.Pending(ctx)
	if err != nil {
		return err
	}
	d.m.pending.Set(float64(p.Total))
	d.m.pendingMax.Set(float64(p.MaxEndpoint))
	return nil
}

func (d *Dispatcher) refreshGauges(ctx context.Context) {
	if err := d.RefreshGauges(ctx); err != nil && ctx.Err() == nil {
		d.cfg.Logger.Warn("read webhook queue depth", "err", err)
	}
}

// claimAndStart claims up to the free workers and starts an attempt for
// each; more says the claim was full (more may be due). counted, when set,
// is told how many were claimed before they start, and done (its group) is
// told as each finishes.
func (d *Dispatcher) claimAndStart(ctx context.Context, counted func(int), done ...*sync.WaitGroup) (more bool, err error) {
	d.pollMu.Lock()
	defer d.pollMu.Unlock()
	if ctx.Err() != nil {
		return false, nil
	}
	d.mu.Lock()
	limit := d.cfg.Workers - d.total
	free := make(map[int64]int, len(d.inflight))
	for id, n := range d.inflight {
		free[id] = max(d.cfg.EndpointConcurrency-n, 0)
	}
	d.mu.Unlock()
	if limit <= 0 {
		if counted != nil {
			counted(0)
		}
		return false, nil
	}
	now := d.cfg.Now()
	claimed, err := d.cfg.Store.Claim(ctx, ClaimRequest{
		Now:         now,
		LeaseUntil:  now.Add(d.cfg.Timeout + d.cfg.Grace),
		Limit:       limit,
		Free:        free,
		PerEndpoint: d.cfg.EndpointConcurrency,
	})
	if counted != nil {
		counted(len(claimed))
	}
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	for _, c := range claimed {
		d.inflight[c.EndpointID]++
		d.total++
	}
	d.mu.Unlock()
	for _, c := range claimed {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for _, wg := range done {
				defer wg.Done()
			}
			d.attempt(ctx, c)
			d.mu.Lock()
			if d.inflight[c.EndpointID]--; d.inflight[c.EndpointID] <= 0 {
				delete(d.inflight, c.EndpointID)
			}
			d.total--
			d.mu.Unlock()
			// A slot is free: what waited for it may go now.
			d.Wake()
		}()
	}
	return len(claimed) == limit, nil
}

// attempt makes one attempt and records its outcome.
func (d *Dispatcher) attempt(ctx context.Context, c Claimed) {
	log := d.cfg.Logger.With("delivery_id", c.ID, "endpoint_id", c.EndpointID, "event_id", c.EventID, "program_id", c.ProgramID)
	at := d.cfg.Now()
	secrets := make([]string, 0, len(c.Secrets))
	var sig string
	var openErr error
	for _, sealed := range c.Secrets {
		s, err := d.cfg.Secrets.Open(sealed, c.EndpointID)
		if err != nil {
			openErr = err
			continue
		}
		secrets = append(secrets, s)
	}
	err := openErr
	// With no secret at all Signature refuses: nothing is sent unsigned.
	if len(secrets) > 0 || openErr == nil {
		if openErr != nil {
			// A secret sealed under another key (one rotated out while the
			// key changed): the others still sign, and a receiver holding
			// one of them still verifies.
			log.Warn("a signing secret of the endpoint does not open under WEBHOOKS_SECRET_KEY; signed with the others", "err", openErr)
		}
		sig, err = Signature(c.EventID, at, c.Body, secrets)
	}
	if err != nil {
		// Ours, not the endpoint's (a key that does not open what it
		// sealed, no current secret): nothing is sent, the delivery waits
		// for its next attempt and the endpoint's record stays as it was.
		log.Error("sign webhook delivery", "err", err)
		d.record(ctx, log, c, Response{Error: "internal error"}, false)
		return
	}
	resp := d.cfg.Sender.Send(ctx, Request{URL: c.URL, ID: c.EventID, Timestamp: at, Signature: sig, Body: c.Body})
	if !resp.OK() && ctx.Err() != nil {
		// Stopping: the attempt was cut by us, not the endpoint. Its lease
		// brings it back.
		return
	}
	d.m.attempts.WithLabelValues(resp.Result).Inc()
	d.record(ctx, log, c, resp, true)
}

// record records an attempt's outcome: delivered, retried or failed.
func (d *Dispatcher) record(ctx context.Context, log *slog.Logger, c Claimed, resp Response, endpointFault bool) {
	now := d.cfg.Now()
	o := Outcome{
		DeliveryID:    c.ID,
		EndpointID:    c.EndpointID,
		Attempt:       c.Attempt,
		Now:           now,
		Status:        resp.Status,
		Error:         resp.Error,
		Duration:      resp.Duration,
		EndpointFault: endpointFault,
		DisableBefore: now.Add(-d.cfg.DisableAfter),
	}
	outcome := outcomeRetried
	switch {
	case resp.OK():
		o.Delivered, outcome = true, outcomeDelivered
	case now.Sub(c.CreatedAt) >= d.cfg.MaxAge:
		o.Failed, outcome = true, outcomeFailed
	default:
		o.NextAttemptAt = now.Add(Backoff(c.Attempt, d.cfg.Rand()))
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	rec, err := d.cfg.Store.Record(rctx, o)
	if err != nil {
		// Unrecorded, the delivery is attempted again when its lease ends.
		log.Error("record webhook delivery", "err", err)
		return
	}
	d.m.deliveries.WithLabelValues(outcome).Inc()
	if o.Delivered {
		d.m.lag.Observe(max(now.Sub(c.EventCreatedAt), 0).Seconds())
	}
	if o.Failed {
		log.Info("webhook delivery failed, retries over", "attempts", c.Attempt, "last_error", resp.Error)
	}
	if rec.Disabled {
		d.m.disabled.Inc()
		log.Warn("webhook endpoint disabled: failing every attempt", "disable_after", d.cfg.DisableAfter.String())
	}
}
