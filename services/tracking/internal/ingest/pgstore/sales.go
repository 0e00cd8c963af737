package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// saleCustomerSQL selects a customer locked for a payment, with the
// partner-program check riding along (one round trip, not two).
const saleCustomerSQL = `SELECT ` + customerColumns + `,
		EXISTS (SELECT 1 FROM partner_programs pp WHERE pp.program_id = c.program_id AND pp.partner_id = c.first_partner_id)
	FROM customers c LEFT JOIN programs p ON p.id = c.program_id `

// customerLookup is one identifier's query for a payment's customer.
type customerLookup struct {
	sql  string
	args []any
}

// saleCustomerLookups lists the payment's identifiers that are set, in the
// order of the specification, each as the query that finds and locks its
// customer (the newest one where an identifier matches several: a buyer
// who signed up twice).
func saleCustomerLookups(ref ingest.SaleRef) []customerLookup {
	all := []struct {
		value, where string
		inProgram    bool
	}{
		{ref.ClickID, `WHERE c.click_id = $1`, false},
		{ref.EmailHash, `WHERE c.program_id = $2 AND c.email_hash = $1`, true},
		{ref.ProcessorCustomerID, `WHERE c.program_id = $2 AND c.processor_customer_id = $1`, true},
		{ref.ClientReferenceID, `WHERE c.click_id = $1 AND c.program_id = $2`, true},
		{ref.CustomerKey, `WHERE c.program_id = $2 AND c.customer_key = $1`, true},
	}
	var out []customerLookup
	for _, l := range all {
		if l.value == "" {
			continue
		}
		args := []any{l.value}
		if l.inProgram {
			args = append(args, ref.ProgramID)
		}
		out = append(out, customerLookup{sql: saleCustomerSQL + l.where + ` ORDER BY c.id DESC LIMIT 1 FOR UPDATE OF c`, args: args})
	}
	return out
}

// scanSaleCustomer reads one lookup's answer; found is false for no row.
func scanSaleCustomer(row pgx.Row) (c ingest.Customer, found bool, err error) {
	var linked bool
	c, err = scanCustomer(rowWith{row, &linked})
	if errors.Is(err, pgx.ErrNoRows) {
		return ingest.Customer{}, false, nil
	}
	if err != nil {
		return ingest.Customer{}, false, fmt.Errorf("load customer for sale: %w", err)
	}
	c.PartnerLinked = linked
	return c, true, nil
}

// findSaleCustomer runs lookups in order until one finds its customer.
func findSaleCustomer(ctx context.Context, tx pg.Querier, lookups []customerLookup) (ingest.Customer, bool, error) {
	for _, l := range lookups {
		c, found, err := scanSaleCustomer(tx.QueryRow(ctx, l.sql, l.args...))
		if err != nil || found {
			return c, found, err
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

// applyPayment writes an attribution decision for the locked customer c:
// the settled lead at once (it reads what it writes), then the sale's part
// (the customer's conversion or its sale_recorded_at, a processor customer
// id it has none of, and the conversion's event) kept in w, for the
// caller to send with its own last writes in one round trip. The sale
// itself is the commissions service's to record.
func (s *Store) applyPayment(ctx context.Context, tx pg.Querier, w *decisionWrites, c ingest.Customer, d ingest.PaymentDecision, ref ingest.SaleRef, at time.Time, res *ingest.PaymentResult) error {
	if d.SettleLead {
		ld := ingest.LeadDecision{CustomerKey: ref.CustomerKey, EmailHash: ref.EmailHash, EventName: "processor_checkout"}
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
		c.HasProvisional, c.SignupDate = false, at
	}
	if d.Sale == nil {
		return nil
	}
	sale := d.Sale
	var processorID any
	if sale.ProcessorCustomerID != "" && c.ProcessorCustomerID == "" {
		processorID = sale.ProcessorCustomerID
	}
	if !d.Convert {
		w.rows.Row(saleSeen, fmt.Sprintf("record the sale of customer %d", c.ID), c.ID, at, processorID, at)
		return nil
	}
	res.CustomerStatus = "conversion"
	w.rows.Row(converted, fmt.Sprintf("convert customer %d", c.ID), c.ID, sale.OccurredAt, at, processorID, at)
	// Analytics counts conversions by first purchase date: the event rides
	// in the transaction of the conversion, so it exists exactly when the
	// conversion does.
	ev := &eventsv1.CustomerConverted{CustomerId: c.ID, ProgramId: c.ProgramID, ClickId: c.ClickID, PartnerId: c.FirstPartnerID,
		TransactionId: sale.TransactionID, FirstPurchaseDate: timestamppb.New(sale.OccurredAt), ConvertedAt: timestamppb.New(at)}
	if !c.SignupDate.IsZero() {
		ev.SignupDate = timestamppb.New(c.SignupDate)
	}
	env, err := envelope(eventsv1.TypeCustomerConverted, c.ProgramID, at, ev)
	if err != nil {
		return err
	}
	w.events = append(w.events, env)
	return nil
}
