package server

import (
	"context"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/webhooks/internal/delivery"
	"github.com/svc-dev/svc/services/webhooks/internal/delivery/pgstore"
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
	p.AddCloser(func(context.Context) error { sender.Close(); return nil })
	return d, nil
}
