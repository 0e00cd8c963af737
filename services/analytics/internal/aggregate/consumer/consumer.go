// Package consumer keeps analytics' pre-aggregated figures from the
// events of tracking (tracking.events.v1: clicks, leads, conversions) and
// of the commissions ledger (commissions.events.v1: sales, commissions,
// refunds),
// each applied inside the inbox transaction the platform opens for it, so
// the figures and the inbox row commit together: a redelivered envelope is
// dropped by the inbox, and a second copy of an event under another
// envelope (a replay, a re-published outbox row) is dropped by the
// counted table, keyed by the producer's own id.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Groups of the two consumers; keep them stable (renaming one re-applies
// every event still in Kafka, and the counted table then holds them off).
func TrackingGroup(service string) string    { return service + ".tracking" }
func CommissionsGroup(service string) string { return service + ".commissions" }

// BatchSize is how many fetched events the consumers apply in one
// transaction: the handlers only add to counters and may share one.
const BatchSize = 200

// Bucket is the aggregates' time grain: every real time-zone offset is a
// whole number of quarter hours.
const Bucket = 15 * time.Minute

// bucket is t's 15-minute UTC bucket.
func bucket(t time.Time) time.Time { return t.UTC().Truncate(Bucket) }

// TestEventsKept is how many test events per program and kind are kept
// (status lists up to 10).
const TestEventsKept = 10

// LeadSettled is LeadRecorded.status of a lead that makes the customer a
// lead (a provisional one does not, until it settles).
const LeadSettled = "settled"

// FiguresLock is the advisory lock between the figures' writers and a
// rebuild's switch or an fx import: every transaction that writes the
// figures holds it shared from before its first write; the switch holds it
// exclusively before it locks the tables, an import before it changes the
// rates the writers convert money at. Without it, a consumer's transaction holding
// one table and waiting for the next deadlocks with the switch holding the
// second and waiting for the first.
const FiguresLock int64 = 0x616e616c79746963 // "analytic"

// shareFigures takes FiguresLock shared for the transaction (again in the
// same transaction is free).
func shareFigures(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, FiguresLock); err != nil {
		return fmt.Errorf("share the figures' lock: %w", err)
	}
	return nil
}

// Tracking applies tracking's events.
func Tracking(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	if err := shareFigures(ctx, tx); err != nil {
		return err
	}
	switch env.GetType() {
	case eventsv1.TypeClickRecorded:
		var ev eventsv1.ClickRecorded
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			return fmt.Errorf("decode %s: %w", env.GetType(), err)
		}
		at := ev.GetClickedAt().AsTime()
		if ev.GetIsTest() {
			if !ev.GetViaApiKey() {
				return nil // key-less: stored by tracking, verifies nothing
			}
			return testEvent(ctx, tx, ev.GetProgramId(), "click", ev.GetEventId(), at, env.GetOccurredAt().AsTime())
		}
		if err := noteLatest(ctx, tx, "click", []latest{{ev.GetProgramId(), ev.GetEventId(), at}}); err != nil {
			return err
		}
		return click(ctx, tx, &ev)
	case eventsv1.TypeLeadRecorded:
		var ev eventsv1.LeadRecorded
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			return fmt.Errorf("decode %s: %w", env.GetType(), err)
		}
		if ev.GetIsTest() {
			if !ev.GetViaApiKey() {
				return nil
			}
			return testEvent(ctx, tx, ev.GetProgramId(), "lead", ev.GetEventId(), ev.GetRecordedAt().AsTime(), env.GetOccurredAt().AsTime())
		}
		if err := noteLatest(ctx, tx, "lead", []latest{{ev.GetProgramId(), ev.GetEventId(), ev.GetRecordedAt().AsTime()}}); err != nil {
			return err
		}
		if ev.GetStatus() != LeadSettled || ev.GetCustomerId() == 0 || ev.GetSignupDate() == nil {
			return nil
		}
		return signedUp(ctx, tx, ev.GetProgramId(), ev.GetCustomerId(), ev.GetPartnerId(), ev.GetSignupDate().AsTime())
	case eventsv1.TypeCustomerConverted:
		var ev eventsv1.CustomerConverted
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			return fmt.Errorf("decode %s: %w", env.GetType(), err)
		}
		if ev.GetCustomerId() == 0 || ev.GetFirstPurchaseDate() == nil {
			return nil
		}
		if ev.GetSignupDate() != nil {
			if err := signedUp(ctx, tx, ev.GetProgramId(), ev.GetCustomerId(), ev.GetPartnerId(), ev.GetSignupDate().AsTime()); err != nil {
				return err
			}
		}
		return converted(ctx, tx, ev.GetProgramId(), ev.GetCustomerId(), ev.GetPartnerId(), ev.GetFirstPurchaseDate().AsTime())
	}
	return nil
}

// Commissions applies the ledger's events.
func Commissions(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	if err := shareFigures(ctx, tx); err != nil {
		return err
	}
	switch env.GetType() {
	case eventsv1.TypeLedgerSaleRecorded:
		var ev eventsv1.LedgerSaleRecorded
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			return fmt.Errorf("decode %s: %w", env.GetType(), err)
		}
		if ev.GetIsTest() || ev.GetAmountCents() <= 0 {
			return nil
		}
		if first, err := once(ctx, tx, "sale", ev.GetSaleId()); err != nil || !first {
			return err
		}
		at := ev.GetOccurredAt().AsTime()
		if err := addActivity(ctx, tx, ev.GetProgramId(), at, "sales"); err != nil {
			return err
		}
		if err := addMoney(ctx, tx, ev.GetProgramId(), at, ev.GetCurrency(), money{revenue: ev.GetAmountCents()}); err != nil {
			return err
		}
		return saleSource(ctx, tx, &ev)
	case eventsv1.TypeCommissionCreated:
		var ev eventsv1.CommissionCreated
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			return fmt.Errorf("decode %s: %w", env.GetType(), err)
		}
		if ev.GetAmount() <= 0 {
			return nil
		}
		if first, err := once(ctx, tx, "commission", ev.GetCommissionId()); err != nil || !first {
			return err
		}
		at := ev.GetCreatedAt().AsTime()
		if err := addMoney(ctx, tx, ev.GetProgramId(), at, ev.GetCurrency(), money{commission: ev.GetAmount()}); err != nil {
			return err
		}
		return addPartnerMoney(ctx, tx, ev.GetProgramId(), ev.GetPartnerId(), at, ev.GetCurrency(), 0, ev.GetAmount())
	case eventsv1.TypeRefundRecorded:
		var ev eventsv1.RefundRecorded
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			return fmt.Errorf("decode %s: %w", env.GetType(), err)
		}
		return refund(ctx, tx, &ev)
	}
	return nil
}

// refund counts a refund the ledger applied, once, on the day it was
// made (not the sale's day: Overview explains a balance that dropped
// then), in the sale's currency converted like revenue. Only a refund of
// a sale the figures counted: the event carries no test flag, and a test
// sale's refund must not show beside real revenue (the ledger's outbox
// publishes a sale before any refund of it).
func refund(ctx context.Context, tx pgx.Tx, ev *eventsv1.RefundRecorded) error {
	if ev.GetAmountCents() <= 0 {
		return nil
	}
	var real bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM counted WHERE kind = 'sale' AND id = $1)`, ev.GetSaleId()).Scan(&real); err != nil {
		return fmt.Errorf("sale %d of refund %d: %w", ev.GetSaleId(), ev.GetRefundId(), err)
	}
	if !real {
		return nil
	}
	if first, err := once(ctx, tx, "refund", ev.GetRefundId()); err != nil || !first {
		return err
	}
	at := ev.GetCreatedAt().AsTime()
	if err := addActivity(ctx, tx, ev.GetProgramId(), at, "refunds"); err != nil {
		return err
	}
	return addMoney(ctx, tx, ev.GetProgramId(), at, ev.GetSaleCurrency(), money{refunded: ev.GetAmountCents()})
}

// once records that the producer's event (kind, id) is counted; false when
// it was counted before.
func once(ctx context.Context, tx pgx.Tx, kind string, id int64) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO counted (kind, id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, kind, id)
	if err != nil {
		return false, fmt.Errorf("count %s %d: %w", kind, id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// addActivity adds one to a counter column of the program's bucket of at
// and of its UTC day (column is one of the constants above, never input).
func addActivity(ctx context.Context, tx pgx.Tx, program int64, at time.Time, column string) error {
	switch column {
	case "clicks", "leads", "conversions", "sales", "refunds":
	default:
		return fmt.Errorf("unknown activity counter %q", column)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO activity_buckets (program_id, bucket, `+column+`) VALUES ($1, $2, 1)
		ON CONFLICT (program_id, bucket) DO UPDATE SET `+column+` = activity_buckets.`+column+` + 1`, program, bucket(at)); err != nil {
		return fmt.Errorf("add %s of program %d: %w", column, program, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO activity_days (program_id, day, `+column+`) VALUES ($1, $2, 1)
		ON CONFLICT (program_id, day) DO UPDATE SET `+column+` = activity_days.`+column+` + 1`, program, utcDay(at)); err != nil {
		return fmt.Errorf("add daily %s of program %d: %w", column, program, err)
	}
	return nil
}

// utcDay is t's UTC calendar day (the daily rollups' key).
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// money is what an event adds to a day's money, in minor units of one
// currency.
type money struct{ revenue, commission, refunded int64 }

func addMoney(ctx context.Context, tx pgx.Tx, program int64, at time.Time, currency string, m money) error {
	if _, err := tx.Exec(ctx, `INSERT INTO money_buckets (program_id, bucket, currency, revenue_minor, commission_minor, refunded_minor) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (program_id, bucket, currency) DO UPDATE SET revenue_minor = money_buckets.revenue_minor + EXCLUDED.revenue_minor,
			commission_minor = money_buckets.commission_minor + EXCLUDED.commission_minor,
			refunded_minor = money_buckets.refunded_minor + EXCLUDED.refunded_minor`,
		program, bucket(at), currency, m.revenue, m.commission, m.refunded); err != nil {
		return fmt.Errorf("add money of program %d: %w", program, err)
	}
	// The day's dollars at its rate (fx_daily; a day outside it has its
	// nearest day's) are added to the day's row beside the minor units, so
	// the route reads them without converting per row. A currency without
	// rates (none: fx_rates refers to currencies) counts no dollars.
	if _, err := tx.Exec(ctx, `WITH m AS (
			INSERT INTO money_days (program_id, day, currency, revenue_minor, commission_minor, refunded_minor) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (program_id, day, currency) DO UPDATE SET revenue_minor = money_days.revenue_minor + EXCLUDED.revenue_minor,
				commission_minor = money_days.commission_minor + EXCLUDED.commission_minor,
				refunded_minor = money_days.refunded_minor + EXCLUDED.refunded_minor
		)
		INSERT INTO activity_days (program_id, day, revenue_usd, commission_usd, refunded_usd, fx_estimated)
		SELECT $1, $2, COALESCE($4 * f.usd_per_minor, 0), COALESCE($5 * f.usd_per_minor, 0), COALESCE($6 * f.usd_per_minor, 0), COALESCE(f.estimated, false)
		FROM (SELECT) one LEFT JOIN fx_daily f ON f.currency = $3 AND f.day = LEAST(GREATEST($2::date, DATE '2000-01-01'), DATE '2100-12-31')
		ON CONFLICT (program_id, day) DO UPDATE SET revenue_usd = activity_days.revenue_usd + EXCLUDED.revenue_usd,
			commission_usd = activity_days.commission_usd + EXCLUDED.commission_usd,
			refunded_usd = activity_days.refunded_usd + EXCLUDED.refunded_usd,
			fx_estimated = activity_days.fx_estimated OR EXCLUDED.fx_estimated`,
		program, utcDay(at), currency, m.revenue, m.commission, m.refunded); err != nil {
		return fmt.Errorf("add daily money of program %d: %w", program, err)
	}
	return nil
}

// signedUp counts a customer as a lead of its signup bucket, once: a
// customer already counted (a second settled lead, a conversion that says
// the same signup date) is not counted again.
func signedUp(ctx context.Context, tx pgx.Tx, program, customer, partner int64, signup time.Time) error {
	return countCustomer(ctx, tx, program, customer, partner, signup, "signup_bucket", "lead", "leads")
}

// converted counts a customer as a conversion of its first purchase
// bucket, once.
func converted(ctx context.Context, tx pgx.Tx, program, customer, partner int64, first time.Time) error {
	return countCustomer(ctx, tx, program, customer, partner, first, "first_purchase_bucket", "conversion", "conversions")
}

// countCustomer records the customer's bucket of at in bucketColumn, unless
// one is there (then it was counted), and adds one to counter in that
// bucket, of the program, of the customer's source and of the partner it
// was attributed to. A new customer row gets status; a conversion also
// moves an existing one (columns are the callers' constants, never input).
func countCustomer(ctx context.Context, tx pgx.Tx, program, customer, partner int64, at time.Time, bucketColumn, status, counter string) error {
	var had *time.Time
	err := tx.QueryRow(ctx, `SELECT `+bucketColumn+` FROM customers WHERE customer_id = $1 FOR UPDATE`, customer).Scan(&had)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		_, err = tx.Exec(ctx, `INSERT INTO customers (customer_id, program_id, status, `+bucketColumn+`) VALUES ($1, $2, $3, $4)`,
			customer, program, status, bucket(at))
	case err != nil:
	case had != nil:
		return nil
	default:
		_, err = tx.Exec(ctx, `UPDATE customers SET `+bucketColumn+` = $2,
			status = CASE WHEN $3 = 'conversion' THEN 'conversion' ELSE status END WHERE customer_id = $1`, customer, bucket(at), status)
	}
	if err != nil {
		return fmt.Errorf("customer %d: %w", customer, err)
	}
	if err := addActivity(ctx, tx, program, at, counter); err != nil {
		return err
	}
	source, _, err := customerSource(ctx, tx, program, customer)
	if err != nil {
		return err
	}
	if err := addKeyed(ctx, tx, "source_buckets", "source_id", program, source, at, counter); err != nil {
		return err
	}
	return addKeyed(ctx, tx, "partner_buckets", "partner_id", program, partner, at, counter)
}

// latest is a real event's program, id and time, for latest_events.
type latest struct {
	program, id int64
	at          time.Time
}

// noteLatest moves each program's latest real event of kind forward
// (latest_events, the Install page's "last real click/lead"): newer by
// (time, id) only, so a redelivery or a late event never moves it back.
func noteLatest(ctx context.Context, tx pgx.Tx, kind string, evs []latest) error {
	if len(evs) == 0 {
		return nil
	}
	programs, ids, ats := make([]int64, len(evs)), make([]int64, len(evs)), make([]time.Time, len(evs))
	for i, e := range evs {
		programs[i], ids[i], ats[i] = e.program, e.id, e.at
	}
	if _, err := tx.Exec(ctx, `INSERT INTO latest_events AS l (program_id, kind, event_id, occurred_at)
		SELECT p, $1, i, a FROM unnest($2::bigint[], $3::bigint[], $4::timestamptz[]) AS t (p, i, a)
		ON CONFLICT (program_id, kind) DO UPDATE SET event_id = EXCLUDED.event_id, occurred_at = EXCLUDED.occurred_at
		WHERE (l.occurred_at, l.event_id) < (EXCLUDED.occurred_at, EXCLUDED.event_id)`, kind, programs, ids, ats); err != nil {
		return fmt.Errorf("note the latest real %s: %w", kind, err)
	}
	return nil
}

// testEvent keeps a test click or lead for status and readiness, and
// only the latest TestEventsKept of the program's kind. Only test events
// sent with the program's API key get here ("only a test event sent with
// the program API key counts toward integration verification"): anyone
// can send a key-less one naming any program.
func testEvent(ctx context.Context, tx pgx.Tx, program int64, kind string, id int64, occurred, created time.Time) error {
	if _, err := tx.Exec(ctx, `INSERT INTO test_events (program_id, kind, event_id, occurred_at, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (kind, event_id) DO NOTHING`, program, kind, id, occurred, created); err != nil {
		return fmt.Errorf("keep test %s %d: %w", kind, id, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM test_events WHERE program_id = $1 AND kind = $2 AND (occurred_at, event_id) < (
			SELECT occurred_at, event_id FROM test_events WHERE program_id = $1 AND kind = $2
			ORDER BY occurred_at DESC, event_id DESC OFFSET $3 - 1 LIMIT 1)`, program, kind, TestEventsKept); err != nil {
		return fmt.Errorf("trim test %ss: %w", kind, err)
	}
	return nil
}
