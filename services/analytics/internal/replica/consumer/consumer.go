// Package consumer is the Kafka transport of analytics' catalog replica:
// it applies accounts catalog events (topic accounts.catalog.v1) to the
// tables the dashboard routes read (programs with their creation and
// payment setup, memberships with their permissions, partner-program
// records, program API keys as hashes, users' suspensions and signed-out
// sessions), inside the inbox transaction of each event, and advances the
// catalog watermark the sync barrier waits on.
package consumer

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/catalogsync"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Group is the consumer group (and inbox name) of the replica consumer of
// service; keep it stable, renaming it re-applies every event in Kafka.
func Group(service string) string { return service + ".catalog" }

// Defaults of an older program event without them (the spec's defaults).
const (
	DefaultPaymentTrackingMode = "processor_connect"
	DefaultProcessorStatus     = "not_connected"
)

// Applier applies one catalog event inside the inbox transaction.
type Applier struct {
	// Service is the name catalog progress is acknowledged under.
	Service string
	Now     func() time.Time
}

// Apply is an inbox handler: it upserts what analytics keeps and, for
// every catalog event (kept or not), advances the catalog watermark. An
// older snapshot never overwrites a newer one (catalog_seq).
func (a Applier) Apply(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	if err := upsert(ctx, tx, env); err != nil {
		return err
	}
	return catalogsync.Applied(ctx, tx, a.Service, env.GetEpoch(), env.GetSeq(), a.Now())
}

func optTime(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime()
	return &v
}

func upsert(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	seq := env.GetSeq()
	switch env.GetType() {
	case eventsv1.TypeProgramUpserted:
		var p eventsv1.Program
		if err := proto.Unmarshal(env.GetPayload(), &p); err != nil {
			return fmt.Errorf("decode program event %s: %w", env.GetId(), err)
		}
		mode := p.GetPaymentTrackingMode()
		if mode == "" {
			mode = DefaultPaymentTrackingMode
		}
		pc := p.GetProcessorConnection()
		status := pc.GetStatus()
		if status == "" {
			status = DefaultProcessorStatus
		}
		if _, err := tx.Exec(ctx, `INSERT INTO programs (id, created_at, payment_tracking_mode, processor_status, processor_account_id,
				charges_enabled, payouts_enabled, details_submitted, connected_at, catalog_seq)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)
			ON CONFLICT (id) DO UPDATE SET created_at = EXCLUDED.created_at, payment_tracking_mode = EXCLUDED.payment_tracking_mode,
				processor_status = EXCLUDED.processor_status, processor_account_id = EXCLUDED.processor_account_id,
				charges_enabled = EXCLUDED.charges_enabled, payouts_enabled = EXCLUDED.payouts_enabled,
				details_submitted = EXCLUDED.details_submitted, connected_at = EXCLUDED.connected_at, catalog_seq = EXCLUDED.catalog_seq
			WHERE programs.catalog_seq < EXCLUDED.catalog_seq`,
			p.GetId(), optTime(p.GetCreatedAt()), mode, status, pc.GetAccountId(), pc.GetChargesEnabled(), pc.GetPayoutsEnabled(),
			pc.GetDetailsSubmitted(), optTime(pc.GetConnectedAt()), seq); err != nil {
			return fmt.Errorf("upsert program %d: %w", p.GetId(), err)
		}
	case eventsv1.TypeMembershipUpserted, eventsv1.TypeUserUpserted, eventsv1.TypeSessionRevoked:
		// The console's tables, kept as commissions' and webhooks' are.
		return catalogsync.ApplyConsole(ctx, tx, env)
	case eventsv1.TypePartnerProgramUpserted:
		var pp eventsv1.PartnerProgram
		if err := proto.Unmarshal(env.GetPayload(), &pp); err != nil {
			return fmt.Errorf("decode partner-program event %s: %w", env.GetId(), err)
		}
		created := pp.GetCreatedAt().AsTime()
		if pp.GetCreatedAt() == nil {
			created = env.GetOccurredAt().AsTime()
		}
		if _, err := tx.Exec(ctx, `INSERT INTO partner_programs (id, program_id, partner_id, approved, created_at, catalog_seq)
			VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT (id) DO UPDATE SET program_id = EXCLUDED.program_id, partner_id = EXCLUDED.partner_id,
				approved = EXCLUDED.approved, created_at = EXCLUDED.created_at, catalog_seq = EXCLUDED.catalog_seq
			WHERE partner_programs.catalog_seq < EXCLUDED.catalog_seq`,
			pp.GetId(), pp.GetProgramId(), pp.GetPartnerId(), pp.GetApproved(), created, seq); err != nil {
			return fmt.Errorf("upsert partner program %d: %w", pp.GetId(), err)
		}
	case eventsv1.TypePartnerUpserted:
		var pa eventsv1.Partner
		if err := proto.Unmarshal(env.GetPayload(), &pa); err != nil {
			return fmt.Errorf("decode partner event %s: %w", env.GetId(), err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO partners (id, name, fixture_program_id, catalog_seq) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, fixture_program_id = EXCLUDED.fixture_program_id,
				catalog_seq = EXCLUDED.catalog_seq
			WHERE partners.catalog_seq < EXCLUDED.catalog_seq`, pa.GetId(), pa.GetName(), FixtureProgram(pa.GetEmail()), seq); err != nil {
			return fmt.Errorf("upsert partner %d: %w", pa.GetId(), err)
		}
	case eventsv1.TypeAPIKeyUpserted:
		return catalogsync.UpsertAPIKey(ctx, tx, env)
	}
	// Other catalog events are not kept here; they still advance the
	// watermark.
	return nil
}

// fixtureEmail is the address of the `svc test` fixture partner accounts
// makes for a program's CLI test events (proto Partner.email):
// test-partner+<program id>@svc.invalid.
var fixtureEmail = regexp.MustCompile(`^test-partner\+([1-9][0-9]{0,18})@svc\.invalid$`)

// FixtureProgram is the program whose fixture partner has this address, or
// nil (SQL NULL) for any other partner. The dashboard leaves a program's
// fixture partner out of its partners (hasPartners, partners,
// totalPartners), as the CLI's status does.
func FixtureProgram(email string) any {
	m := fixtureEmail.FindStringSubmatch(email)
	if m == nil {
		return nil
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return nil
	}
	return id
}
