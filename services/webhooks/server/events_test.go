package server

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
)

// The service consumes tracking's, the ledger's and the catalog's topics
// into webhook events and deliveries (real Postgres, the embedded broker,
// the service as it runs): each source event once, however often it is
// published, and only what the program's endpoints listen for.
func TestWebhookEventsFromTheTopics(t *testing.T) {
	clock := platformtest.NewClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	env := platformtest.Env(t)
	inst := platformtest.Start(t, Spec(), env, platform.WithClock(clock.Now))
	p := inst.Platform()
	ctx := context.Background()
	if _, err := p.Pool.Exec(ctx, `INSERT INTO endpoints (program_id, url, events, created_at, updated_at)
		VALUES (7, 'https://hooks.example/in', $1, $2, $2)`,
		[]string{events.TypeSaleCreated, events.TypeClickRecorded, events.TypePartnerEnrolled, events.TypeCommissionCreated}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	w := kafkakit.NewWriter(strings.Split(env["KAFKA_BROKERS"], ","))
	t.Cleanup(func() { _ = w.Close() })

	at := timestamppb.New(clock.Now())
	msg := func(topic, typ string, program, seq int64, m proto.Message) kafka.Message {
		payload, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(&eventsv1.Envelope{Id: uuid.NewString(), Type: typ, OccurredAt: at, ProgramId: program, Seq: seq,
			Epoch: "epoch-1", Source: "test", Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		return kafka.Message{Topic: topic, Key: []byte(strconv.FormatInt(program, 10)), Value: b}
	}
	sale := msg(eventsv1.TopicCommissions, eventsv1.TypeLedgerSaleRecorded, 7, 0,
		&eventsv1.LedgerSaleRecorded{SaleId: 1, TransactionId: "tx_1", ProgramId: 7, AmountCents: 100, Currency: "USD", Source: "api", OccurredAt: at})
	msgs := []kafka.Message{
		msg(eventsv1.TopicTracking, eventsv1.TypeClickRecorded, 7, 0, &eventsv1.ClickRecorded{EventId: 1, ProgramId: 7, LinkId: 1, PartnerId: 2, ClickedAt: at}),
		msg(eventsv1.TopicTracking, eventsv1.TypeVisitRecorded, 7, 0, &eventsv1.VisitRecorded{EventId: 1, ProgramId: 7}),
		msg(eventsv1.TopicTracking, eventsv1.TypeClickRecorded, 8, 0, &eventsv1.ClickRecorded{EventId: 2, ProgramId: 8, LinkId: 1, PartnerId: 2, ClickedAt: at}),
		msg(eventsv1.TopicTracking, eventsv1.TypeLeadRecorded, 7, 0, &eventsv1.LeadRecorded{EventId: 3, CustomerId: 4, ProgramId: 7, Status: "settled", RecordedAt: at}),
		sale, sale, // published twice: one event
		msg(eventsv1.TopicCommissions, eventsv1.TypeCommissionCreated, 7, 0,
			&eventsv1.CommissionCreated{CommissionId: 5, SaleId: 1, ProgramId: 7, PartnerId: 2, Kind: "sale", Status: "pending", Amount: 10, Currency: "USD", HoldUntil: at, CreatedAt: at}),
		msg(eventsv1.TopicCatalog, eventsv1.TypePartnerProgramUpserted, 7, 1, &eventsv1.PartnerProgram{Id: 9, PartnerId: 2, ProgramId: 7, Approved: true, CreatedAt: at}),
		msg(eventsv1.TopicCatalog, eventsv1.TypePartnerProgramUpserted, 7, 2, &eventsv1.PartnerProgram{Id: 9, PartnerId: 2, ProgramId: 7, Approved: true, CreatedAt: at}),
	}
	// The topics exist once the platform says so; a write before that
	// (or while the broker settles) is tried again until the deadline.
	deadline := time.Now().Add(30 * time.Second)
	select {
	case <-p.TopicsReady():
	case <-time.After(time.Until(deadline)):
		t.Fatal("topics not ready")
	}
	for err := w.WriteMessages(ctx, msgs...); err != nil; err = w.WriteMessages(ctx, msgs...) {
		if time.Now().After(deadline) {
			t.Fatalf("publish: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	want := []string{events.TypeClickRecorded, events.TypeCommissionCreated, events.TypePartnerEnrolled, events.TypeSaleCreated}
	var got []string
	for {
		rows, err := p.Pool.Query(ctx, `SELECT e.type FROM events e JOIN deliveries d ON d.event_id = e.id ORDER BY e.type`)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events with their deliveries %v, want %v", got, want)
	}
	// Nothing else comes: every message was applied (the consumers'
	// inboxes hold them all) and no other event was written.
	for {
		var applied int
		if err := p.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox`).Scan(&applied); err != nil {
			t.Fatal(err)
		}
		if applied >= 7 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var n int
	if err := p.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM deliveries)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2*len(want) {
		t.Fatalf("%d events and deliveries, want %d", n, 2*len(want))
	}
}
