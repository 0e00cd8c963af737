package server

import (
	"github.com/svc-dev/svc/libs/platform"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/webhooks/internal/events/consumer"
)

// wireEvents consumes tracking's and the ledger's topics into webhook
// events and their deliveries (partner.enrolled comes from the catalog
// replica's Before hook, set where wire builds its Applier). Both
// consumers batch: each event is one independent insert, and a batch that
// fails is applied again one event at a time by the inbox. Events that
// cause no webhook event are acknowledged without a transaction.
func wireEvents(p *platform.Platform, _ Config) error {
	w := consumer.Writer{Now: p.Now}
	opts := []platform.ConsumeOption{
		platform.BatchEvents(consumer.BatchSize), platform.BatchHandler(w.ApplyBatch), platform.SkipEvents(consumer.Skip),
	}
	if err := p.Consume(eventsv1.TopicTracking, consumer.TrackingGroup(p.Name), w.Apply, opts...); err != nil {
		return err
	}
	return p.Consume(eventsv1.TopicCommissions, consumer.LedgerGroup(p.Name), w.Apply, opts...)
}
