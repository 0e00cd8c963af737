// Package server is commissions' wiring: its Spec for the platform and the
// wire function that builds the service from the opened platform. The
// commissions issue fills it (sales, commissions, refunds, balances); today
// it keeps its catalog replica and serves the platform's health, readiness
// and metrics routes.
package server

import (
	"context"

	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/platform"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/commissions/internal/replica/consumer"
	"github.com/svc-dev/svc/services/commissions/migrations"
)

// Name is the service's name: its schema, consumer-group prefix and logs.
const Name = "commissions"

// Spec describes commissions to the platform.
func Spec() platform.Spec {
	return platform.Spec{
		Name:       Name,
		Migrations: migrations.FS,
		// Commissions keeps a replica of the catalog: the barrier's
		// progress tables live in its schema.
		ExtraMigrations: []platform.MigrateFunc{catalogsync.Migrate},
		Topics:          []string{eventsv1.TopicCatalog, eventsv1.TopicCatalogApplied},
		Wire:            wire,
	}
}

// wire builds commissions on the opened platform.
func wire(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
	if err := p.Consume(eventsv1.TopicCatalog, consumer.Group(p.Name), consumer.Applier{Service: p.Name, Now: p.Now}.Apply); err != nil {
		return nil, err
	}
	return nil, nil
}
