package server

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/webhooks/internal/delivery"
	"github.com/svc-dev/svc/services/webhooks/internal/delivery/pgstore"
	eventstore "github.com/svc-dev/svc/services/webhooks/internal/events/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
)

// wireDelivery builds the dispatcher and runs it beside the server. Without
// WEBHOOKS_SECRET_KEY it starts none (nil, no error): nothing could be
// signed, and the deliveries wait until the key is set.
func wireDelivery(p *platform.Platform, cfg Config) (*delivery.Dispatcher, error) {
	if cfg.SecretKey == "" {
		p.Logger.Warn("WEBHOOKS_SECRET_KEY is not set: no webhook is delivered")
		return nil, nil
	}
	key, err := secret.ParseKey(cfg.SecretKey)
	if err != nil {
		return nil, err
	}
	box, err := secret.NewBox(key)
	if err != nil {
		return nil, err
	}
	if cfg.AllowPrivate {
		p.Logger.Warn("WEBHOOKS_ALLOW_PRIVATE is set: endpoints may use http:// and private, loopback and link-local addresses")
	}
	sender := delivery.NewSender(delivery.SenderConfig{
		AllowPrivate:   cfg.AllowPrivate,
		Timeout:        cfg.Timeout,
		MaxIdlePerHost: cfg.EndpointConcurrency,
	})
	d, err := delivery.New(delivery.Config{
		Store:               pgstore.New(p.Pool),
		Sender:              sender,
		Secrets:             box,
		Now:                 p.Now,
		Logger:              p.Logger.With("component", "delivery"),
		Registerer:          p.Registry,
		Workers:             cfg.Workers,
		EndpointConcurrency: cfg.EndpointConcurrency,
		Timeout:             cfg.Timeout,
		PollInterval:        cfg.PollInterval,
		DisableAfter:        cfg.DisableAfter,
	})
	if err != nil {
		return nil, err
	}
	p.AddRunner(d.Run)
	p.AddRunner(wakeOnWrite(p, d))
	p.AddCloser(func(context.Context) error { sender.Close(); return nil })
	return d, nil
}

// wakeOnWrite keeps a LISTEN on the channel the event writer notifies when
// it wrote deliveries (eventstore.NotifyChannel), and wakes the dispatcher
// on each notification, so a delivery leaves as soon as its event commits
// instead of at the next poll. Without the connection the poll still runs:
// a lost listener costs latency, never a delivery.
func wakeOnWrite(p *platform.Platform, d *delivery.Dispatcher) func(context.Context) error {
	return func(ctx context.Context) error {
		for ctx.Err() == nil {
			err := listenOnce(ctx, p, d)
			if ctx.Err() != nil {
				return nil
			}
			p.Logger.Warn("delivery wake-up listener lost; the dispatcher polls until it reconnects", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		return nil
	}
}

func listenOnce(ctx context.Context, p *platform.Platform, d *delivery.Dispatcher) error {
	conn, err := p.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{eventstore.NotifyChannel}.Sanitize()); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *") }()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		d.Wake()
	}
}
