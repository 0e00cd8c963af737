// Package consumer is the Kafka transport of webhook events: inbox
// handlers that map tracking's and the ledger's events (and, through the
// catalog replica's Before hook, partner enrolments) into webhook events
// and write them with their deliveries in the inbox transaction, so each
// is written once however often Kafka redelivers its source.
package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
	"github.com/svc-dev/svc/services/webhooks/internal/events/pgstore"
)

// Consumer groups (and inbox names); keep them stable, renaming one
// re-applies every event in Kafka.
func TrackingGroup(service string) string { return service + ".tracking" }

// LedgerGroup is the group of the ledger topic's consumer.
func LedgerGroup(service string) string { return service + ".ledger" }

// BatchSize is how many fetched events one transaction applies: the
// tracking topic carries every click, and a batch of them costs one round
// trip (pgstore.Write pipelines its statements).
const BatchSize = 100

// Skip reports the source events that can cause no webhook event (visits,
// tracking's sales, notifications, …): acknowledged without a
// transaction.
func Skip(env *eventsv1.Envelope) bool { return !events.Mapped(env.GetType()) }

// Writer maps events and writes them.
type Writer struct {
	// Now creates an event whose source has no time (the platform's clock).
	Now func() time.Time
}

// Apply is an inbox handler for one event.
func (w Writer) Apply(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	return w.ApplyBatch(ctx, tx, []*eventsv1.Envelope{env})
}

// ApplyBatch is the inbox's batch handler: the events of every envelope,
// in order, in one round trip.
func (w Writer) ApplyBatch(ctx context.Context, tx pgx.Tx, envs []*eventsv1.Envelope) error {
	var evs []events.Event
	for _, env := range envs {
		mapped, err := events.Map(env, w.Now())
		if err != nil {
			return err
		}
		evs = append(evs, mapped...)
	}
	_, err := pgstore.Write(ctx, tx, evs)
	return err
}

// Enrolled is the catalog replica's Before hook: run before a catalog
// event is applied, it compares a partner-program upsert with the record
// the replica keeps and writes partner.enrolled when the event approves
// the partner in the program. It also keeps the programs' `svc test`
// fixture partners (partner upserts), whose enrolment is a test event.
func (w Writer) Enrolled(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	switch env.GetType() {
	case eventsv1.TypePartnerUpserted:
		var p eventsv1.Partner
		if err := proto.Unmarshal(env.GetPayload(), &p); err != nil {
			return fmt.Errorf("decode partner event %s: %w", env.GetId(), err)
		}
		if program := events.FixtureProgram(p.GetEmail()); program != 0 {
			return pgstore.KeepFixturePartner(ctx, tx, p.GetId(), program)
		}
		return nil
	case eventsv1.TypePartnerProgramUpserted:
		var pp eventsv1.PartnerProgram
		if err := proto.Unmarshal(env.GetPayload(), &pp); err != nil {
			return fmt.Errorf("decode partner-program event %s: %w", env.GetId(), err)
		}
		if !pp.GetApproved() {
			return nil
		}
		prev, err := pgstore.Enrolment(ctx, tx, pp.GetId(), pp.GetProgramId(), pp.GetPartnerId())
		if err != nil {
			return err
		}
		_, err = pgstore.Write(ctx, tx, events.Enrolled(env, &pp, prev, w.Now()))
		return err
	}
	return nil
}
