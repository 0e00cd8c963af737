package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

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

// applyPayment writes an attribution decision for the locked customer c:
// the settled lead, then (with a sale) the customer's conversion or its
// sale_recorded_at, and a processor customer id it has none of. The sale
// itself is the commissions service's to record.
func (s *Store) applyPayment(ctx context.Context, tx pgx.Tx, c ingest.Customer, d ingest.PaymentDecision, ref ingest.SaleRef, at time.Time, res *ingest.PaymentResult) error {
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
	var err error
	if d.Convert {
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
	if !d.Convert {
		return nil
	}
	// Analytics counts conversions by first purchase date: the event rides
	// in the transaction of the conversion, so it exists exactly when the
	// conversion does.
	ev := &eventsv1.CustomerConverted{CustomerId: c.ID, ProgramId: c.ProgramID, ClickId: c.ClickID, PartnerId: c.FirstPartnerID,
		TransactionId: sale.TransactionID, FirstPurchaseDate: timestamppb.New(sale.OccurredAt), ConvertedAt: timestamppb.New(at)}
	if !c.SignupDate.IsZero() {
		ev.SignupDate = timestamppb.New(c.SignupDate)
	}
	return publish(ctx, tx, eventsv1.TypeCustomerConverted, c.ProgramID, at, ev)
}
