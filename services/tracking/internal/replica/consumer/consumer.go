// Package consumer is the Kafka transport of the catalog replica: it applies
// accounts catalog events (topic catalog.events.v1) to tracking's own copy of
// the programs, links, API keys and partner-program records, inside the
// inbox transaction the platform opens for each event, and notifies the
// replica's change (catalogsync.Notify) so every pod's catalog cache drops
// its entries when it commits.
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
	// platform's service name, never a constant: a copied service must not
	// report as this one).
	Service string
	Now     func() time.Time
}

// Apply is an inbox handler: it upserts the entities tracking keeps and, for
// every catalog event (kept or not), advances the catalog watermark.
func (a Applier) Apply(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	kept, err := a.upsert(ctx, tx, env)
	if err != nil {
		return err
	}
	if kept {
		// Every pod's catalog cache drops its entries when this commits.
		if err := catalogsync.Notify(ctx, tx); err != nil {
			return err
		}
	}
	return catalogsync.Applied(ctx, tx, a.Service, env.GetEpoch(), env.GetSeq(), a.Now())
}

// upsert stores the entity if tracking keeps it, and says whether it did.
func (a Applier) upsert(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) (bool, error) {
	seq := env.GetSeq()
	switch env.GetType() {
	case eventsv1.TypeProgramUpserted:
		var p eventsv1.Program
		if err := proto.Unmarshal(env.GetPayload(), &p); err != nil {
			return false, fmt.Errorf("decode program event %s: %w", env.GetId(), err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO programs (id, advertiser_id, attribution_window_days, lead_auth_policy,
				payment_tracking_mode, processor_status, processor_account_id, allowed_origins, catalog_seq, updated_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)
			ON CONFLICT (id) DO UPDATE SET advertiser_id = EXCLUDED.advertiser_id,
				attribution_window_days = EXCLUDED.attribution_window_days, lead_auth_policy = EXCLUDED.lead_auth_policy,
				payment_tracking_mode = EXCLUDED.payment_tracking_mode, processor_status = EXCLUDED.processor_status,
				processor_account_id = EXCLUDED.processor_account_id,
				allowed_origins = EXCLUDED.allowed_origins, catalog_seq = EXCLUDED.catalog_seq, updated_at = EXCLUDED.updated_at
			WHERE programs.catalog_seq < EXCLUDED.catalog_seq`,
			p.GetId(), p.GetAdvertiserId(), p.GetAttributionWindowDays(), p.GetLeadAuthPolicy(), p.GetPaymentTrackingMode(),
			p.GetProcessorConnection().GetStatus(), p.GetProcessorConnection().GetAccountId(), nonNil(p.GetAllowedOrigins()),
			seq, p.GetUpdatedAt().AsTime())
		if err != nil {
			return false, fmt.Errorf("upsert program %d: %w", p.GetId(), err)
		}
	case eventsv1.TypeAPIKeyUpserted:
		if err := catalogsync.UpsertAPIKey(ctx, tx, env); err != nil {
			return false, err
		}
	case eventsv1.TypePartnerProgramUpserted:
		var pp eventsv1.PartnerProgram
		if err := proto.Unmarshal(env.GetPayload(), &pp); err != nil {
			return false, fmt.Errorf("decode partner-program event %s: %w", env.GetId(), err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO partner_programs (id, partner_id, program_id, approved, created_at, catalog_seq)
			VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT (id) DO UPDATE SET approved = EXCLUDED.approved, catalog_seq = EXCLUDED.catalog_seq
			WHERE partner_programs.catalog_seq < EXCLUDED.catalog_seq`,
			pp.GetId(), pp.GetPartnerId(), pp.GetProgramId(), pp.GetApproved(), pp.GetCreatedAt().AsTime(), seq)
		if err != nil {
			return false, fmt.Errorf("upsert partner-program %d: %w", pp.GetId(), err)
		}
	case eventsv1.TypeLinkUpserted:
		var l eventsv1.Link
		if err := proto.Unmarshal(env.GetPayload(), &l); err != nil {
			return false, fmt.Errorf("decode link event %s: %w", env.GetId(), err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO links (id, program_id, partner_id, code, active, catalog_seq)
			VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT (id) DO UPDATE SET active = EXCLUDED.active, catalog_seq = EXCLUDED.catalog_seq
			WHERE links.catalog_seq < EXCLUDED.catalog_seq`,
			l.GetId(), l.GetProgramId(), l.GetPartnerId(), l.GetCode(), l.GetActive(), seq)
		if err != nil {
			return false, fmt.Errorf("upsert link %d: %w", l.GetId(), err)
		}
	default:
		// Other catalog events (advertisers, users, partners, memberships)
		// are not kept here; they still advance the watermark.
		return false, nil
	}
	return true, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
