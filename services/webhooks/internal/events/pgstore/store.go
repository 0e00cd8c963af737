// Package pgstore writes webhook events and their deliveries inside the
// transaction the caller (the inbox) opened, so an event is stored and fanned
// out exactly once with the inbox row of the Kafka event that caused it.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/services/webhooks/internal/events"
)

// NotifyChannel is the Postgres channel told, at commit, that deliveries
// were written (the dispatcher may LISTEN to look at once instead of at
// its next poll). Postgres folds repeats within one transaction into one.
const NotifyChannel = "webhooks_deliveries"

// write stores one event and its deliveries in one statement: the
// endpoints of the program that are enabled, list the type and (for a
// test event) include test events; the event row only when there is one,
// or when a `svc listen` listener of the program still alive at the
// event's time wants it (same rules; a listener gets no delivery: the
// event is queued for it in listener_events, which its polls take). A program with neither writes nothing, at the
// cost of one probe of endpoints_program and one of listeners_program. A
// delivery per endpoint, due at once. A replayed event id conflicts and
// writes no event, hence no delivery. No row is locked on the path
// without a delivery (the click topic's usual one); an endpoint deleted
// meanwhile fails the deliveries' foreign key, and the inbox applies the
// event again.
const write = `WITH ep AS (
	SELECT id FROM endpoints
	WHERE program_id = $1 AND enabled AND $2 = ANY(events) AND (include_test OR NOT $3::boolean)
), li AS (
	SELECT id FROM listeners
	WHERE program_id = $1 AND expires_at > $7 AND $2 = ANY(events) AND (include_test OR NOT $3::boolean)
), ev AS (
	INSERT INTO events (id, program_id, type, is_test, object_key, body, created_at)
	SELECT $4, $1, $2, $3, $5, $6, $7
	WHERE EXISTS (SELECT 1 FROM ep) OR EXISTS (SELECT 1 FROM li)
	ON CONFLICT (id) DO NOTHING
	RETURNING id, seq
), queued AS (
	INSERT INTO listener_events (listener_id, seq, event_id) SELECT li.id, ev.seq, ev.id FROM li CROSS JOIN ev
)
INSERT INTO deliveries (endpoint_id, event_id, event_type, object_key, status, next_attempt_at, created_at)
SELECT ep.id, ev.id, $2, $5, 'pending', $7, $7 FROM ep CROSS JOIN ev ORDER BY ep.id`

// Write stores evs (in their order) and their deliveries in tx, and
// answers how many deliveries it wrote. The statements go in one round
// trip (two when the events include test sales or refunds, see
// testSales).
func Write(ctx context.Context, tx pgx.Tx, evs []events.Event) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	if err := testSales(ctx, tx, evs); err != nil {
		return 0, err
	}
	b := &pgx.Batch{}
	for _, e := range evs {
		body, err := e.Body()
		if err != nil {
			return 0, err
		}
		b.Queue(write, e.ProgramID, e.Type, e.IsTest, e.ID, e.ObjectKey, body, e.CreatedAt)
	}
	res := tx.SendBatch(ctx, b)
	var n int64
	var errs []error
	for _, e := range evs {
		tag, err := res.Exec()
		if err != nil {
			errs = append(errs, fmt.Errorf("write %s %s of program %d: %w", e.Type, e.ID, e.ProgramID, err))
			break
		}
		n += tag.RowsAffected()
	}
	if err := res.Close(); err != nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("write %d webhook events: %w", len(evs), err))
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if n > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, NotifyChannel); err != nil {
			return 0, fmt.Errorf("notify %s: %w", NotifyChannel, err)
		}
	}
	return n, nil
}

// testSales keeps the ids of the test sales among evs (sale.created with
// IsTest) and marks the refunds of test sales (sale.refunded, whose source
// event does not say) as test events, in place. Both whether or not any
// endpoint receives them: a sale's refund may come when one does.
func testSales(ctx context.Context, tx pgx.Tx, evs []events.Event) error {
	var tests, refunds []int64
	for _, e := range evs {
		switch {
		case e.Type == events.TypeSaleCreated && e.IsTest:
			tests = append(tests, e.SaleID())
		case e.Type == events.TypeSaleRefunded:
			refunds = append(refunds, e.SaleID())
		}
	}
	if len(tests) == 0 && len(refunds) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `WITH kept AS (
			INSERT INTO test_sales (sale_id) SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING
		)
		SELECT sale_id FROM test_sales WHERE sale_id = ANY($2::bigint[])
		UNION SELECT s FROM unnest($1::bigint[]) s WHERE s = ANY($2::bigint[])`, tests, refunds)
	if err != nil {
		return fmt.Errorf("test sales: %w", err)
	}
	test, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("test sales: %w", err)
	}
	for i, e := range evs {
		if e.Type == events.TypeSaleRefunded && slices.Contains(test, e.SaleID()) {
			evs[i].IsTest = true
		}
	}
	return nil
}

// Enrolment reads what the replica keeps of the partner-program record id
// (before a catalog event about it is applied, in the same transaction),
// and whether partner is program's `svc test` fixture partner.
func Enrolment(ctx context.Context, tx pgx.Tx, id, program, partner int64) (events.Enrolment, error) {
	var e events.Enrolment
	var approved *bool
	var seq *int64
	err := tx.QueryRow(ctx, `SELECT pp.approved, pp.catalog_seq,
			EXISTS (SELECT 1 FROM fixture_partners WHERE partner_id = $3 AND program_id = $2)
		FROM (SELECT 1) one LEFT JOIN partner_programs pp ON pp.id = $1`, id, program, partner).Scan(&approved, &seq, &e.Test)
	if err != nil {
		return events.Enrolment{}, fmt.Errorf("load partner program %d: %w", id, err)
	}
	if approved != nil && seq != nil {
		e.Found, e.Approved, e.Seq = true, *approved, *seq
	}
	return e, nil
}

// KeepFixturePartner records that partner is program's `svc test` fixture
// partner.
func KeepFixturePartner(ctx context.Context, tx pgx.Tx, partner, program int64) error {
	if _, err := tx.Exec(ctx, `INSERT INTO fixture_partners (partner_id, program_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		partner, program); err != nil {
		return fmt.Errorf("keep fixture partner %d of program %d: %w", partner, program, err)
	}
	return nil
}
