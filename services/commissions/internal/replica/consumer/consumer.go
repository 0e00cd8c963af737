// Package consumer is the Kafka transport of commissions' catalog replica:
// it applies accounts catalog events (topic accounts.catalog.v1) to
// commissions' own copy of the programs (commission terms, currency, lead
// reward, payment tracking mode and processor connection) program API keys, and what the console routes check (memberships, users'
// suspensions, signed-out sessions, partner-program records), inside the
// inbox transaction the platform opens for each event, and advances the
// catalog watermark the sync barrier waits on.
package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/catalogsync"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Group is the consumer group (and inbox name) of the replica consumer of
// service; keep it stable, renaming it re-applies every event in Kafka.
func Group(service string) string { return service + ".catalog" }

// Applier applies one catalog event inside the inbox transaction.
type Applier struct {
	// Service is the name catalog progress is acknowledged under (the
	// platform's service name).
	Service string
	Now     func() time.Time
}

// Apply is an inbox handler: it upserts the entities commissions keeps and,
// for every catalog event (kept or not), advances the catalog watermark.
func (a Applier) Apply(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	if err := a.upsert(ctx, tx, env); err != nil {
		return err
	}
	// Every pod's key cache (the only cache over this replica) drops its
	// entries when a key's change commits: a revoked or rotated key is seen
	// at once. Only then: a notifying commit holds Postgres' cluster-wide
	// notification lock through its WAL flush.
	if env.GetType() == eventsv1.TypeAPIKeyUpserted {
		if err := catalogsync.Notify(ctx, tx); err != nil {
			return err
		}
	}
	return catalogsync.Applied(ctx, tx, a.Service, env.GetEpoch(), env.GetSeq(), a.Now())
}

// Defaults of a program event published before accounts sent the
// program's currency and lead reward: what such a program meant then.
const (
	DefaultCurrency       = "USD"
	DefaultLeadCommission = "0"
	// DefaultPaymentTrackingMode is the spec's default paymentTrackingMode.
	DefaultPaymentTrackingMode = "processor_connect"
)

// programMoney is the event's currency and lead reward, the defaults for
// the empty fields of an older event.
func programMoney(p *eventsv1.Program) (currency, lead string) {
	currency, lead = p.GetCurrency(), p.GetLeadCommission()
	if currency == "" {
		currency = DefaultCurrency
	}
	if lead == "" {
		lead = DefaultLeadCommission
	}
	return currency, lead
}

func (a Applier) upsert(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	seq := env.GetSeq()
	switch env.GetType() {
	case eventsv1.TypeProgramUpserted:
		var p eventsv1.Program
		if err := proto.Unmarshal(env.GetPayload(), &p); err != nil {
			return fmt.Errorf("decode program event %s: %w", env.GetId(), err)
		}
		currency, lead := programMoney(&p)
		mode := p.GetPaymentTrackingMode()
		if mode == "" {
			mode = DefaultPaymentTrackingMode
		}
		_, err := tx.Exec(ctx, `INSERT INTO programs (id, advertiser_id, commission_type, commission_rate,
				duration_months, hold_days, currency, lead_commission, catalog_seq, updated_at,
				payment_tracking_mode, processor_status, processor_account_id)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)
			ON CONFLICT (id) DO UPDATE SET advertiser_id = EXCLUDED.advertiser_id,
				commission_type = EXCLUDED.commission_type, commission_rate = EXCLUDED.commission_rate,
				duration_months = EXCLUDED.duration_months, hold_days = EXCLUDED.hold_days,
				currency = EXCLUDED.currency, lead_commission = EXCLUDED.lead_commission,
				catalog_seq = EXCLUDED.catalog_seq, updated_at = EXCLUDED.updated_at,
				payment_tracking_mode = EXCLUDED.payment_tracking_mode, processor_status = EXCLUDED.processor_status,
				processor_account_id = EXCLUDED.processor_account_id
			WHERE programs.catalog_seq < EXCLUDED.catalog_seq`,
			p.GetId(), p.GetAdvertiserId(), p.GetCommissionType(), p.GetCommissionRate(),
			p.GetDurationMonths(), p.GetHoldDays(), currency, lead, seq, p.GetUpdatedAt().AsTime(),
			mode, p.GetProcessorConnection().GetStatus(), p.GetProcessorConnection().GetAccountId())
		if err != nil {
			return fmt.Errorf("upsert program %d: %w", p.GetId(), err)
		}
	case eventsv1.TypeAPIKeyUpserted:
		return catalogsync.UpsertAPIKey(ctx, tx, env)
	case eventsv1.TypeMembershipUpserted, eventsv1.TypePartnerProgramUpserted, eventsv1.TypeUserUpserted, eventsv1.TypeSessionRevoked:
		return catalogsync.ApplyConsole(ctx, tx, env)
	}
	// Other catalog events are not kept here; they still advance the
	// watermark.
	return nil
}
