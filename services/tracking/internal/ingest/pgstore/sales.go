package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// saleByTransaction returns the id of the sale stored under txn, or 0.
func saleByTransaction(ctx context.Context, q querier, txn string) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT id FROM sales WHERE processor_event_id = $1`, txn).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look up sale %q: %w", txn, err)
	}
	return id, nil
}

// raceLost answers an insert that another request's sale under the same id
// beat between our check and our insert: the winner has committed (the
// unique index made us wait for it), so it is read outside our aborted
// transaction.
func (s *Store) raceLost(ctx context.Context, txn string) error {
	id, err := saleByTransaction(ctx, s.pool, txn)
	if err != nil {
		return err
	}
	return duplicateSale(id)
}

func duplicateSale(id int64) error {
	return &ingest.Error{Kind: ingest.ErrDuplicate, Message: ingest.MsgSaleDuplicate, SaleID: id}
}

// findSaleCustomer tries the payment's identifiers in the order of the
// specification, locking the customer found.
func findSaleCustomer(ctx context.Context, tx pgx.Tx, ref ingest.SaleRef) (ingest.Customer, bool, error) {
	// The partner-program check rides along (one round trip, not two).
	const sel = `SELECT ` + customerColumns + `,
			EXISTS (SELECT 1 FROM partner_programs pp WHERE pp.program_id = c.program_id AND pp.partner_id = c.first_partner_id)
		FROM customers c LEFT JOIN programs p ON p.id = c.program_id `
	type lookup struct {
		value string
		where string
	}
	lookups := []lookup{
		{ref.ClickID, `WHERE c.click_id = $1`},
		{ref.EmailHash, `WHERE c.program_id = $2 AND c.email_hash = $1`},
		{ref.ProcessorCustomerID, `WHERE c.program_id = $2 AND c.processor_customer_id = $1`},
		{ref.ClientReferenceID, `WHERE c.click_id = $1 AND c.program_id = $2`},
		{ref.CustomerKey, `WHERE c.program_id = $2 AND c.customer_key = $1`},
	}
	for i, l := range lookups {
		if l.value == "" {
			continue
		}
		args := []any{l.value}
		if i > 0 {
			args = append(args, ref.ProgramID)
		}
		// The newest customer wins where an identifier matches several (a
		// buyer who signed up twice).
		var linked bool
		c, err := scanCustomer(rowWith{tx.QueryRow(ctx, sel+l.where+` ORDER BY c.id DESC LIMIT 1 FOR UPDATE OF c`, args...), &linked})
		if err == nil {
			c.PartnerLinked = linked
			return c, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return ingest.Customer{}, false, fmt.Errorf("load customer for sale: %w", err)
		}
	}
	return ingest.Customer{}, false, nil
}

// rowWith scans a row into scanCustomer's destinations and its one
// extra last column into extra.
type rowWith struct {
	pgx.Row
	extra *bool
}

func (r rowWith) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra)...) }

// Pay records a payment in one transaction: the duplicate check, the
// customer lock, a settled lead, the sale and the conversion, their events,
// and the processor event when there is one.
func (s *Store) Pay(ctx context.Context, req ingest.PaymentRequest, decide func(ingest.Customer) (ingest.PaymentDecision, error)) (ingest.PaymentResult, error) {
	var res ingest.PaymentResult
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		res = ingest.PaymentResult{}
		if req.Event != nil {
			var seen bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM processor_events WHERE event_id = $1)`, req.Event.ID).Scan(&seen); err != nil {
				return fmt.Errorf("check processor event: %w", err)
			}
			if seen {
				return ingest.ErrDuplicateEvent
			}
		}
		if req.TransactionID != "" {
			id, err := saleByTransaction(ctx, tx, req.TransactionID)
			if err != nil {
				return err
			}
			if id != 0 {
				return duplicateSale(id)
			}
		}
		c, ok, err := findSaleCustomer(ctx, tx, req.Ref)
		if err != nil {
			return err
		}
		res.Found = ok
		if ok {
			res.ClickID, res.CustomerStatus = c.ClickID, c.Status
			d, err := decide(c)
			if err != nil {
				return err
			}
			res.Refused = d.Refused
			if d.Refused == nil {
				if err := s.applyPayment(ctx, tx, c, d, req, true, &res); err != nil {
					return err
				}
			}
		}
		if req.Event == nil {
			return nil
		}
		ev := *req.Event
		ev.Outcome = res.Outcome()
		return insertProcessorEvent(ctx, tx, ev)
	})
	return res, err
}

// applyPayment writes a payment decision for the locked customer c: the
// settled lead, then (with a sale) the customer's conversion or its
// sale_recorded_at. With recordSale the sale row and its event are written
// too (processor events); without, the sale is the
// caller's to record (an attribution decision for the commissions service).
func (s *Store) applyPayment(ctx context.Context, tx pgx.Tx, c ingest.Customer, d ingest.PaymentDecision, req ingest.PaymentRequest, recordSale bool, res *ingest.PaymentResult) error {
	at := req.At
	if d.SettleLead {
		ld := ingest.LeadDecision{CustomerKey: req.Ref.CustomerKey, EmailHash: req.Ref.EmailHash, EventName: "processor_checkout"}
		if ld.CustomerKey == "" {
			// The key the browser sent with the provisional lead is saved
			// now that the lead is confirmed.
			if err := tx.QueryRow(ctx, `SELECT COALESCE(customer_key, '') FROM lead_events WHERE customer_id = $1 AND NOT is_test`,
				c.ID).Scan(&ld.CustomerKey); err != nil {
				return fmt.Errorf("load provisional lead: %w", err)
			}
		}
		if err := settleLead(ctx, tx, c, ld, at); err != nil {
			return err
		}
		res.LeadSettled, res.CustomerStatus = true, "lead"
		c.HasProvisional = false
	}
	if d.Sale == nil {
		return nil
	}
	sale := d.Sale
	if recordSale {
		var customerID, partnerID any = c.ID, c.FirstPartnerID
		err := tx.QueryRow(ctx, `INSERT INTO sales (processor_event_id, program_id, customer_id, partner_id, click_id, amount_cents,
				currency, occurred_at, provider, provider_payment_id, livemode, source, payment_kind, processor_customer_id, api_key_id, created_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,NULLIF($15, 0),$16) RETURNING id`,
			sale.TransactionID, c.ProgramID, customerID, partnerID, c.ClickID, sale.AmountCents, sale.Currency, sale.OccurredAt,
			sale.Provider, sale.ProviderPaymentID, sale.Livemode, sale.Source, sale.PaymentKind, sale.ProcessorCustomerID, sale.APIKeyID, at).
			Scan(&res.SaleID)
		if pg.IsUniqueViolation(err) {
			return s.raceLost(ctx, sale.TransactionID)
		}
		if err != nil {
			return fmt.Errorf("store sale: %w", err)
		}
	}
	ev := &eventsv1.SaleRecorded{
		SaleId: res.SaleID, TransactionId: sale.TransactionID, ProgramId: c.ProgramID, CustomerId: c.ID, ClickId: c.ClickID,
		PartnerId: c.FirstPartnerID, AmountCents: sale.AmountCents, Currency: sale.Currency, OccurredAt: timestamppb.New(sale.OccurredAt),
		Source: sale.Source, Provider: sale.Provider, ProviderPaymentId: sale.ProviderPaymentID, Livemode: sale.Livemode != nil && *sale.Livemode,
		CustomerStatus: res.CustomerStatus, PaymentKind: sale.PaymentKind, ProcessorCustomerId: sale.ProcessorCustomerID, ApiKeyId: sale.APIKeyID,
	}
	var processorID any
	if sale.ProcessorCustomerID != "" && c.ProcessorCustomerID == "" {
		processorID = sale.ProcessorCustomerID
	}
	var err error
	if d.Convert {
		ev.Converted, ev.CustomerStatus = true, "conversion"
		ev.FirstPurchaseDate = timestamppb.New(sale.OccurredAt)
		res.CustomerStatus = "conversion"
		_, err = tx.Exec(ctx, `UPDATE customers SET status = 'conversion', first_purchase_date = $2,
				sale_recorded_at = COALESCE(sale_recorded_at, $3), processor_customer_id = COALESCE(processor_customer_id, $4), updated_at = $3
			WHERE id = $1`, c.ID, sale.OccurredAt, at, processorID)
	} else {
		_, err = tx.Exec(ctx, `UPDATE customers SET sale_recorded_at = COALESCE(sale_recorded_at, $2),
				processor_customer_id = COALESCE(processor_customer_id, $3), updated_at = $2 WHERE id = $1`, c.ID, at, processorID)
	}
	if err != nil {
		return fmt.Errorf("record sale on customer: %w", err)
	}
	if !recordSale {
		return nil
	}
	return publish(ctx, tx, eventsv1.TypeSaleRecorded, c.ProgramID, at, ev)
}

func insertProcessorEvent(ctx context.Context, tx pgx.Tx, ev ingest.ProcessorEvent) error {
	var program any
	if ev.ProgramID != 0 {
		program = ev.ProgramID
	}
	_, err := tx.Exec(ctx, `INSERT INTO processor_events (event_id, type, account_id, program_id, outcome, payload)
		VALUES ($1,$2,$3,$4,$5,$6)`, ev.ID, ev.Type, ev.AccountID, program, ev.Outcome, string(ev.Payload))
	if pg.IsUniqueViolation(err) {
		return ingest.ErrDuplicateEvent
	}
	if err != nil {
		return fmt.Errorf("store processor event: %w", err)
	}
	return nil
}

// RecordProcessorEvent stores an event that is not acted on.
func (s *Store) RecordProcessorEvent(ctx context.Context, ev ingest.ProcessorEvent) (bool, error) {
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error { return insertProcessorEvent(ctx, tx, ev) })
	if errors.Is(err, ingest.ErrDuplicateEvent) {
		return true, nil
	}
	return false, err
}

// ProgramByProcessorAccount finds the program connected to a processor
// account.
func (s *Store) ProgramByProcessorAccount(ctx context.Context, accountID string) (ingest.Program, bool, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM programs WHERE processor_account_id = $1 ORDER BY id LIMIT 1`, accountID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return ingest.Program{}, false, nil
	}
	if err != nil {
		return ingest.Program{}, false, fmt.Errorf("find program of processor account: %w", err)
	}
	return s.Program(ctx, id)
}
