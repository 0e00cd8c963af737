package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// errAttributionRaceLost rolls back a decision whose transaction id a
// concurrent call stored first.
var errAttributionRaceLost = errors.New("attribution already decided by a concurrent call")

const attributionColumns = `transaction_id, program_id, outcome, customer_id, click_id, partner_id, link_id, customer_status,
	first_purchase_date, refusal_code, refusal_message, source, decided_at`

const attributionSQL = `SELECT ` + attributionColumns + ` FROM attributions WHERE program_id = $1 AND transaction_id = $2`

func scanAttribution(row pgx.Row, txn string) (ingest.Attribution, bool, error) {
	var a ingest.Attribution
	var first *time.Time
	err := row.Scan(
		&a.TransactionID, &a.ProgramID, &a.Outcome, &a.CustomerID, &a.ClickID, &a.PartnerID, &a.LinkID, &a.CustomerStatus,
		&first, &a.RefusalCode, &a.RefusalMessage, &a.Source, &a.DecidedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ingest.Attribution{}, false, nil
	}
	if err != nil {
		return ingest.Attribution{}, false, fmt.Errorf("load attribution %q: %w", txn, err)
	}
	if first != nil {
		a.FirstPurchaseDate = first.UTC()
	}
	a.DecidedAt = a.DecidedAt.UTC()
	return a, true, nil
}

// Attribute makes one attribution decision, or answers the one stored under
// the program's transaction id. Only an attributed decision is stored (it
// moved the customer, so a retry must replay it); a refusal moves nothing
// and is answered without being kept, so the next call with the id, in this
// program or another, is decided afresh. The customer is locked (FOR
// UPDATE) while the rules run; the decision row is inserted last, so of
// concurrent calls with one program and transaction id exactly one commits
// its transition and decision: the others' insert waits for the winner's
// commit and fails on the key, which rolls their changes back, and they
// answer the stored decision.
//
// Concurrent calls share one transaction (pg.Group, attributeGroup).
// Round trips of a group: BEGIN with every call's stored decision and its
// first identifier's customer, pipelined; then the calls' customer writes,
// decisions and conversion events (one statement for each kind, whatever
// the group's size: pg.Writes), and COMMIT, pipelined.
func (s *Store) Attribute(ctx context.Context, req ingest.AttributionRequest, decide func(ingest.Customer) (ingest.PaymentDecision, error)) (ingest.AttributionResult, error) {
	res, err := s.attributions.Do(ctx, attributeCall{req: req, decide: decide})
	if errors.Is(err, errAttributionRaceLost) {
		prev, ok, err := scanAttribution(s.pool.QueryRow(ctx, attributionSQL, req.Ref.ProgramID, req.TransactionID), req.TransactionID)
		if err != nil {
			return ingest.AttributionResult{}, err
		}
		if !ok {
			return ingest.AttributionResult{}, fmt.Errorf("attribution %q: a concurrent decision won but is not stored", req.TransactionID)
		}
		return ingest.AttributionResult{Found: true, Replayed: true, Decision: prev}, nil
	}
	return res, err
}

// attributeCall is one Attribute call of a group.
type attributeCall struct {
	req    ingest.AttributionRequest
	decide func(ingest.Customer) (ingest.PaymentDecision, error)
}

// attributeKey keeps two calls naming one customer by the same identifier
// (or deciding one transaction id) out of one transaction: the second
// would decide on the customer as it was before the first's writes.
func attributeKey(c attributeCall) string {
	r := c.req.Ref
	return fmt.Sprint(r.ProgramID, "\x00", r.ClickID, "\x00", r.CustomerKey, "\x00", r.EmailHash, "\x00", r.ProcessorCustomerID, "\x00", r.ClientReferenceID)
}

// errSameCustomer fails a group in which two calls found one customer
// by different identifiers: each call then runs alone.
var errSameCustomer = errors.New("two attribution calls of one group found the same customer")

// attributeGroup decides a group of calls in one transaction, each as it
// would be alone: a call's refusal or unknown customer is its own answer,
// and a failure of the transaction (a concurrent decision of one of the
// transaction ids, two calls of one customer) runs each call again alone.
func (s *Store) attributeGroup(ctx context.Context, calls []attributeCall) ([]pg.GroupResult[ingest.AttributionResult], error) {
	var out []pg.GroupResult[ingest.AttributionResult]
	// Generic plans (checked by deploy/devstack/plans): "auto" kept
	// planning the sale customer's lookup on every run, 250 µs a sale.
	err := pg.InPipeTxWithOptions(ctx, s.pool, pg.PipeOptions{GenericPlans: true}, func(tx *pg.PipeTx) error {
		out = make([]pg.GroupResult[ingest.AttributionResult], len(calls))
		ahead, err := replaysAndCustomers(ctx, tx, calls)
		if err != nil {
			return err
		}
		w := &decisionWrites{}
		seen := make(map[int64]bool, len(calls))
		for i, c := range calls {
			res, err := s.attributeOne(ctx, tx, w, c, ahead[i], seen)
			if err != nil {
				return err
			}
			out[i] = res
		}
		if w.rows.Empty() {
			return nil
		}
		// Every call's customer writes, then every decision, then every
		// event: one statement each (pg.Writes), whatever the group's size.
		b := &pgx.Batch{}
		if _, err := w.rows.Queue(b); err != nil {
			return err
		}
		if len(w.events) > 0 {
			if err := outbox.QueueMany(ctx, b, eventsv1.TopicTracking, w.events); err != nil {
				return fmt.Errorf("enqueue %d events: %w", len(w.events), err)
			}
		}
		return sendDecision(ctx, tx, b)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decisionWrites are a group's writes, sent with its COMMIT: the
// customers' and decisions' rows, and the events. They commute as
// pg.Writes needs: each call's customer is locked and is no other call's
// (errSameCustomer), and each decision is a new row of its own key.
type decisionWrites struct {
	rows   pg.Writes
	events []*eventsv1.Envelope
}

// The decision's bulk writes: the customer after a sale that does or does
// not convert it, and the attributed decision.
var (
	saleSeen = pg.UpdateByID("record the sales of %d customers", "customers",
		"sale_recorded_at = COALESCE(sale_recorded_at, ?) timestamptz",
		"processor_customer_id = COALESCE(processor_customer_id, ?) text", "updated_at timestamptz")
	converted = pg.UpdateByID("convert %d customers", "customers", "status = 'conversion'", "first_purchase_date timestamptz",
		"sale_recorded_at = COALESCE(sale_recorded_at, ?) timestamptz",
		"processor_customer_id = COALESCE(processor_customer_id, ?) text", "updated_at timestamptz")
	attributed = pg.InsertRows("store %d attributions", "attributions",
		"transaction_id text", "program_id bigint", "outcome text", "customer_id bigint", "click_id text", "partner_id bigint",
		"link_id bigint", "customer_status text", "first_purchase_date timestamptz", "refusal_code text", "refusal_message text",
		"source text", "decided_at timestamptz")
)

// attributeOne decides one call of a group in tx, keeping its writes in
// w; its returned error fails the group, the result's its own call.
func (s *Store) attributeOne(ctx context.Context, tx *pg.PipeTx, w *decisionWrites, call attributeCall, ahead readAhead, seen map[int64]bool) (pg.GroupResult[ingest.AttributionResult], error) {
	var none pg.GroupResult[ingest.AttributionResult]
	req := call.req
	if ahead.replay {
		return pg.GroupResult[ingest.AttributionResult]{Out: ingest.AttributionResult{Found: true, Replayed: true, Decision: ahead.prev}}, nil
	}
	c, found := ahead.c, ahead.found
	if lookups := saleCustomerLookups(req.Ref); !found && len(lookups) > 1 {
		var err error
		if c, found, err = findSaleCustomer(ctx, tx, lookups[1:]); err != nil {
			return none, err
		}
	}
	if !found {
		return none, nil
	}
	if seen[c.ID] {
		return none, errSameCustomer
	}
	seen[c.ID] = true
	d, err := call.decide(c)
	if err != nil {
		// Nothing of this call is written yet: its error is its own.
		return pg.GroupResult[ingest.AttributionResult]{Err: err}, nil
	}
	a := ingest.Attribution{
		TransactionID: req.TransactionID, ProgramID: req.Ref.ProgramID, CustomerID: c.ID, ClickID: c.ClickID,
		PartnerID: c.FirstPartnerID, LinkID: c.FirstLinkID, CustomerStatus: c.Status, FirstPurchaseDate: c.FirstPurchaseDate,
		Source: req.Source, DecidedAt: req.At,
	}
	if d.Refused != nil {
		a.Outcome = ingest.AttributionRefused
		a.RefusalCode, a.RefusalMessage = ingest.Refusal(d.Refused)
		return pg.GroupResult[ingest.AttributionResult]{Out: ingest.AttributionResult{Found: true, Decision: a}}, nil
	}
	pr := ingest.PaymentResult{CustomerStatus: c.Status}
	if err := s.applyPayment(ctx, tx, w, c, d, req.Ref, req.At, &pr); err != nil {
		return none, err
	}
	a.Outcome, a.CustomerStatus = ingest.AttributionAttributed, pr.CustomerStatus
	if d.Convert && d.Sale != nil {
		a.FirstPurchaseDate = d.Sale.OccurredAt
	}
	var first any
	if !a.FirstPurchaseDate.IsZero() {
		first = a.FirstPurchaseDate
	}
	w.rows.Row(attributed, fmt.Sprintf("store attribution %q", a.TransactionID),
		a.TransactionID, a.ProgramID, a.Outcome, a.CustomerID, a.ClickID, a.PartnerID, a.LinkID, a.CustomerStatus,
		first, a.RefusalCode, a.RefusalMessage, a.Source, a.DecidedAt)
	// Answer what a replay will read (timestamps at the column's
	// microsecond precision).
	a.DecidedAt = a.DecidedAt.Truncate(time.Microsecond)
	if !a.FirstPurchaseDate.IsZero() {
		a.FirstPurchaseDate = a.FirstPurchaseDate.UTC().Truncate(time.Microsecond)
	}
	return pg.GroupResult[ingest.AttributionResult]{Out: ingest.AttributionResult{Found: true, Decision: a}}, nil
}

// readAhead is what the group's first round trip read for one call: the
// decision stored for its program's transaction id and the customer of its
// first identifier (locked; a replay leaves it untouched and the lock ends
// with the transaction).
type readAhead struct {
	prev          ingest.Attribution
	replay, found bool
	c             ingest.Customer
}

// replaysAndCustomers reads every call's readAhead in one round trip.
func replaysAndCustomers(ctx context.Context, tx pg.Querier, calls []attributeCall) (out []readAhead, err error) {
	b := &pgx.Batch{}
	lookups := make([][]customerLookup, len(calls))
	for i, c := range calls {
		lookups[i] = saleCustomerLookups(c.req.Ref)
		b.Queue(attributionSQL, c.req.Ref.ProgramID, c.req.TransactionID)
		if len(lookups[i]) > 0 {
			b.Queue(lookups[i][0].sql, lookups[i][0].args...)
		}
	}
	br := tx.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("load %d attributions: %w", len(calls), cerr)
		}
	}()
	out = make([]readAhead, len(calls))
	for i, c := range calls {
		r := &out[i]
		if r.prev, r.replay, err = scanAttribution(br.QueryRow(), c.req.TransactionID); err != nil {
			return nil, err
		}
		if len(lookups[i]) == 0 {
			continue
		}
		if r.c, r.found, err = scanSaleCustomer(br.QueryRow()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sendDecision sends the decision's writes, the attribution's insert last,
// with the COMMIT. A concurrent call that stored the program's transaction
// id first makes the insert fail on the key: errAttributionRaceLost, and
// nothing of this call is committed.
func sendDecision(ctx context.Context, tx *pg.PipeTx, b *pgx.Batch) error {
	err := tx.SendFinal(ctx, b).Close()
	if pg.IsUniqueViolation(err) && pg.ConstraintName(err) == "attributions_pkey" {
		return errAttributionRaceLost
	}
	if err != nil {
		return fmt.Errorf("store attribution: %w", err)
	}
	return nil
}
