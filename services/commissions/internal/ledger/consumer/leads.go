// Package consumer is the Kafka transport of the ledger's reactions to
// tracking's events (topic tracking.events.v1): a settled lead earns the
// customer's partner the program's per-lead reward. Each event is applied
// inside the inbox transaction the platform opens for it, so the
// commission and the inbox row commit together, once.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/pgstore"
)

// Group is the consumer group (and inbox name) of the leads consumer of
// service; keep it stable, renaming it re-applies every event in Kafka.
func Group(service string) string { return service + ".tracking" }

// LeadStatusSettled is LeadRecorded.status of a settled lead.
const LeadStatusSettled = "settled"

// Leads records the per-lead commission of every settled lead.
type Leads struct {
	Store  *pgstore.Store
	Now    func() time.Time
	Logger *slog.Logger
}

// Apply is an inbox handler. Other event types, provisional leads and
// leads without a partner are acknowledged and change nothing; a test lead
// is recorded as such (no commission). A program not yet in the replica is
// an error, retried by the inbox until the catalog consumer has it.
func (l Leads) Apply(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	if env.GetType() != eventsv1.TypeLeadRecorded {
		return nil
	}
	var ev eventsv1.LeadRecorded
	if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
		return fmt.Errorf("decode %s: %w", env.GetType(), err)
	}
	if ev.GetStatus() != LeadStatusSettled || ev.GetPartnerId() == 0 {
		return nil
	}
	svc, err := ledger.New(ledger.Config{Store: l.Store.Within(tx), Now: l.Now})
	if err != nil {
		return err
	}
	res, err := svc.RecordLead(ctx, ledger.LeadInput{
		ProgramID: ev.GetProgramId(), CustomerID: ev.GetCustomerId(), ClickID: ev.GetClickId(), PartnerID: ev.GetPartnerId(), Test: ev.GetIsTest(),
	})
	if errors.Is(err, ledger.ErrPartnerRequired) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lead commission of customer %d in program %d: %w", ev.GetCustomerId(), ev.GetProgramId(), err)
	}
	if res.Commission != nil && l.Logger != nil {
		l.Logger.DebugContext(ctx, "lead commission", "commission_id", res.Commission.ID, "customer_id", ev.GetCustomerId())
	}
	return nil
}
