// Package server is webhooks' wiring: its Spec for the platform and the
// wire function that builds the service from the opened platform: the
// catalog replica, the consumers that turn tracking's and the ledger's
// events into webhook events, the dispatcher that delivers them, and the
// console's endpoint routes, and `svc listen`'s routes.
package server

import (
	"context"

	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/platform"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	eventsconsumer "github.com/svc-dev/svc/services/webhooks/internal/events/consumer"
	"github.com/svc-dev/svc/services/webhooks/internal/replica/consumer"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

// Name is the service's name: its schema, consumer-group prefix and logs.
const Name = "webhooks"

// Spec describes webhooks to the platform.
func Spec() platform.Spec {
	return platform.Spec{
		Name:       Name,
		Migrations: migrations.FS,
		// Webhooks keeps a replica of the catalog: the barrier's progress
		// tables live in its schema.
		ExtraMigrations: []platform.MigrateFunc{catalogsync.Migrate},
		Topics:          []string{eventsv1.TopicCatalog, eventsv1.TopicCatalogApplied, eventsv1.TopicTracking, eventsv1.TopicCommissions},
		Wire:            wire,
	}
}

// wire builds webhooks on the opened platform from its Config alone.
func wire(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
	cfg, err := LoadConfig(p.Env)
	if err != nil {
		return nil, err
	}
	if _, err := wireDelivery(p, cfg); err != nil {
		return nil, err
	}
	replica := consumer.Applier{Service: p.Name, Now: p.Now, Before: eventsconsumer.Writer{Now: p.Now}.Enrolled}
	if err := p.Consume(eventsv1.TopicCatalog, consumer.Group(p.Name), replica.Apply, platform.BatchEvents(catalogsync.BatchSize)); err != nil {
		return nil, err
	}
	if err := wireEvents(p, cfg); err != nil {
		return nil, err
	}
	var routes []platform.Route
	if err := wireAPI(p, cfg, &routes); err != nil {
		return nil, err
	}
	if err := wireListen(p, cfg, &routes); err != nil {
		return nil, err
	}
	return routes, nil
}
