// Package server wires the tracking service onto the shared platform (an
// importable package so the one-machine stack and cross-service tests run
// the real service in-process; cmd/tracking only calls platform.Run).
package server

import (
	"context"

	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/platform"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/replica"
	"github.com/svc-dev/svc/services/tracking/migrations"
)

// Name is the service's name: its schema, consumer-group prefix and logs.
const Name = "tracking"

// Spec describes tracking to the platform.
func Spec() platform.Spec {
	return platform.Spec{
		Name:           Name,
		Migrations:     migrations.FS,
		CatalogReplica: true,
		Topics:         []string{eventsv1.TopicCatalog, catalogsync.TopicApplied},
		Wire:           wire,
	}
}

func wire(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
	if err := p.Consume(eventsv1.TopicCatalog, Name+".catalog", replica.Applier{Now: p.Now}.Apply); err != nil {
		return nil, err
	}
	// The public tracking routes (click, lead, visit, config) come with the
	// tracking ingest issue; until then the service keeps its replica.
	return nil, nil
}
