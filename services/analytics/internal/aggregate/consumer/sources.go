package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/analytics/internal/sources"
)

// click counts a real click once (by its event id): in its program's
// bucket and day, under its source (its landing page is page_url when the
// tracker sent one, else the referral link followed) and its partner; and
// remembers the source of the customer the click created (a click that
// reused a customer keeps the customer's first source). Clicks are most
// of the events, so this is one statement: the source interned (found, or
// made on first sight), then each write a data-modifying CTE, all skipped
// when the click was counted before.
func click(ctx context.Context, tx pgx.Tx, ev *eventsv1.ClickRecorded) error {
	program, at := ev.GetProgramId(), ev.GetClickedAt().AsTime()
	landing := ev.GetPageUrl()
	if landing == "" {
		landing = ev.GetAffiliateUrl()
	}
	d := sources.FromClick(landing, ev.GetReferrerUrl(), ev.GetCountry(), ev.GetDeviceType())
	var source int64
	if err := tx.QueryRow(ctx, `
		WITH found AS (
			SELECT id FROM sources WHERE program_id = $2 AND referrer = $8 AND utm_source = $9 AND utm_medium = $10
				AND utm_campaign = $11 AND landing_page = $12 AND country = $13 AND device = $14
		), made AS (
			INSERT INTO sources (program_id, referrer, utm_source, utm_medium, utm_campaign, landing_page, country, device)
			SELECT $2, $8, $9, $10, $11, $12, $13, $14 WHERE NOT EXISTS (SELECT 1 FROM found)
			ON CONFLICT (program_id, referrer, utm_source, utm_medium, utm_campaign, landing_page, country, device)
			DO UPDATE SET program_id = EXCLUDED.program_id RETURNING id
		), src AS (
			SELECT id FROM found UNION ALL SELECT id FROM made
		), first AS (
			INSERT INTO counted (kind, id) VALUES ('click', $1::bigint) ON CONFLICT DO NOTHING RETURNING 1
		), bucket AS (
			INSERT INTO activity_buckets (program_id, bucket, clicks) SELECT $2::bigint, $3::timestamptz, 1 FROM first
			ON CONFLICT (program_id, bucket) DO UPDATE SET clicks = activity_buckets.clicks + 1
		), day AS (
			INSERT INTO activity_days (program_id, day, clicks) SELECT $2, $4::date, 1 FROM first
			ON CONFLICT (program_id, day) DO UPDATE SET clicks = activity_days.clicks + 1
		), source AS (
			INSERT INTO source_buckets (program_id, bucket, source_id, clicks) SELECT $2, $3, src.id, 1 FROM first, src
			ON CONFLICT (program_id, bucket, source_id) DO UPDATE SET clicks = source_buckets.clicks + 1
		), partner AS (
			INSERT INTO partner_buckets (program_id, bucket, partner_id, clicks) SELECT $2, $3, $5::bigint, 1 FROM first WHERE $5::bigint <> 0
			ON CONFLICT (program_id, bucket, partner_id) DO UPDATE SET clicks = partner_buckets.clicks + 1
		), customer AS (
			INSERT INTO customer_sources (customer_id, source_id) SELECT $6::bigint, src.id FROM first, src WHERE $6::bigint <> 0
			ON CONFLICT (customer_id) DO UPDATE SET source_id = EXCLUDED.source_id, provisional = false
				WHERE $7::boolean OR customer_sources.provisional
			RETURNING source_id, xmax = 0 AS inserted
		)
		SELECT COALESCE((SELECT source_id FROM customer WHERE NOT inserted), 0)`, ev.GetEventId(), program, bucket(at), utcDay(at), ev.GetPartnerId(), ev.GetCustomerId(), ev.GetNewCustomer(),
		d[sources.DimReferrer], d[sources.DimUTMSource], d[sources.DimUTMMedium], d[sources.DimUTMCampaign],
		d[sources.DimLandingPage], d[sources.DimCountry], d[sources.DimDevice]).Scan(&source); err != nil {
		return fmt.Errorf("count click %d of program %d: %w", ev.GetEventId(), program, err)
	}
	// Only a customer whose row was there before (a sale's provisional
	// claim, which every unsourced sale makes) can have money to move: a
	// row just inserted (xmax 0) spares most clicks the statement.
	if source == 0 {
		return nil
	}
	return moveUnsourced(ctx, tx, []int64{ev.GetCustomerId()}, []int64{source})
}

// moveUnsourced moves the money of the customers' sales applied before
// their source was known (unsourced_sales) under the source each now has
// (sources[i] for customers[i]), and forgets those rows. A source row
// emptied by the move goes rather than stay at zero. The sums are per
// source_money row, since an upsert may not touch a row twice.
func moveUnsourced(ctx context.Context, tx pgx.Tx, customers, sources []int64) error {
	if _, err := tx.Exec(ctx, `
		WITH moved AS (
			DELETE FROM unsourced_sales u USING unnest($1::bigint[], $2::bigint[]) AS c (customer_id, source_id)
			WHERE u.customer_id = c.customer_id
			RETURNING u.program_id, u.bucket, u.currency, u.source_id AS from_source, c.source_id AS to_source, u.revenue_minor
		), elsewhere AS (
			SELECT * FROM moved WHERE from_source <> to_source
		), out AS (
			SELECT program_id, bucket, currency, from_source, sum(revenue_minor) AS revenue FROM elsewhere GROUP BY 1, 2, 3, 4
		), emptied AS (
			DELETE FROM source_money m USING out o
			WHERE m.program_id = o.program_id AND m.bucket = o.bucket AND m.source_id = o.from_source AND m.currency = o.currency
				AND m.revenue_minor = o.revenue
		), taken AS (
			UPDATE source_money m SET revenue_minor = m.revenue_minor - o.revenue FROM out o
			WHERE m.program_id = o.program_id AND m.bucket = o.bucket AND m.source_id = o.from_source AND m.currency = o.currency
				AND m.revenue_minor <> o.revenue
		)
		INSERT INTO source_money (program_id, bucket, source_id, currency, revenue_minor)
		SELECT program_id, bucket, to_source, currency, sum(revenue_minor) FROM elsewhere GROUP BY 1, 2, 3, 4
		ON CONFLICT (program_id, bucket, source_id, currency) DO UPDATE SET revenue_minor = source_money.revenue_minor + EXCLUDED.revenue_minor`,
		customers, sources); err != nil {
		return fmt.Errorf("move the money of sales applied before their customers' sources: %w", err)
	}
	return nil
}

// saleSource credits a paid sale's revenue to its customer's source and to
// the partner the sale was attributed to.
func saleSource(ctx context.Context, tx pgx.Tx, ev *eventsv1.LedgerSaleRecorded) error {
	program, at := ev.GetProgramId(), ev.GetOccurredAt().AsTime()
	source, known, err := claimSource(ctx, tx, program, ev.GetCustomerId())
	if err != nil {
		return err
	}
	if !known && ev.GetCustomerId() != 0 {
		// Its click may still be on its way (another topic): remembered, so
		// the click moves the money under its source.
		if _, err := tx.Exec(ctx, `INSERT INTO unsourced_sales (customer_id, program_id, bucket, currency, source_id, revenue_minor)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (customer_id, bucket, currency) DO UPDATE SET revenue_minor = unsourced_sales.revenue_minor + EXCLUDED.revenue_minor`,
			ev.GetCustomerId(), program, bucket(at), ev.GetCurrency(), source, ev.GetAmountCents()); err != nil {
			return fmt.Errorf("remember the unsourced sale of customer %d: %w", ev.GetCustomerId(), err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO source_money (program_id, bucket, source_id, currency, revenue_minor) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (program_id, bucket, source_id, currency) DO UPDATE SET revenue_minor = source_money.revenue_minor + EXCLUDED.revenue_minor`,
		program, bucket(at), source, ev.GetCurrency(), ev.GetAmountCents()); err != nil {
		return fmt.Errorf("add source revenue of program %d: %w", program, err)
	}
	return addPartnerMoney(ctx, tx, program, ev.GetPartnerId(), at, ev.GetCurrency(), ev.GetAmountCents(), 0)
}

// addPartnerMoney adds revenue and commission to a partner's bucket; money
// attributed to no partner (0) is not a partner's.
func addPartnerMoney(ctx context.Context, tx pgx.Tx, program, partner int64, at time.Time, currency string, revenue, commission int64) error {
	if partner == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO partner_money (program_id, bucket, partner_id, currency, revenue_minor, commission_minor) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (program_id, bucket, partner_id, currency) DO UPDATE SET revenue_minor = partner_money.revenue_minor + EXCLUDED.revenue_minor,
			commission_minor = partner_money.commission_minor + EXCLUDED.commission_minor`,
		program, bucket(at), partner, currency, revenue, commission); err != nil {
		return fmt.Errorf("add partner money of program %d: %w", program, err)
	}
	return nil
}

// customerSource is the source of the click that created the customer; a
// customer whose click is unknown (not applied yet, created before
// analytics kept sources, or by a lead without a click) is credited to the
// empty source: direct, no UTM, unknown page, country and device (known
// false).
func customerSource(ctx context.Context, tx pgx.Tx, program, customer int64) (id int64, known bool, err error) {
	var provisional bool
	err = tx.QueryRow(ctx, `SELECT source_id, provisional FROM customer_sources WHERE customer_id = $1`, customer).Scan(&id, &provisional)
	if errors.Is(err, pgx.ErrNoRows) {
		id, err = internSource(ctx, tx, program, sources.FromClick("", "", "", ""))
		return id, false, err
	}
	if err != nil {
		return 0, false, fmt.Errorf("source of customer %d: %w", customer, err)
	}
	return id, !provisional, nil
}

// claimSource is customerSource for a sale, which must not miss a click
// applied concurrently (its insert not committed yet): a customer without
// a source row gets one, the empty source, provisional. A concurrent
// click's insert of the row then waits for this transaction and replaces
// the provisional source (moving what this sale remembered), or this
// insert waits for the click's and reads its source.
func claimSource(ctx context.Context, tx pgx.Tx, program, customer int64) (id int64, known bool, err error) {
	id, known, err = customerSource(ctx, tx, program, customer)
	if err != nil || known || customer == 0 {
		return id, known, err
	}
	tag, err := tx.Exec(ctx, `INSERT INTO customer_sources (customer_id, source_id, provisional) VALUES ($1, $2, true)
		ON CONFLICT (customer_id) DO NOTHING`, customer, id)
	if err != nil {
		return 0, false, fmt.Errorf("claim the source of customer %d: %w", customer, err)
	}
	if tag.RowsAffected() == 1 {
		return id, false, nil
	}
	// The row was there (provisional, from an earlier sale) or a click's
	// insert committed meanwhile: read it again.
	return customerSource(ctx, tx, program, customer)
}

// internSource is the id of the program's source with these dimensions,
// made on first sight.
func internSource(ctx context.Context, tx pgx.Tx, program int64, d sources.Dims) (int64, error) {
	args := []any{program, d[sources.DimReferrer], d[sources.DimUTMSource], d[sources.DimUTMMedium], d[sources.DimUTMCampaign],
		d[sources.DimLandingPage], d[sources.DimCountry], d[sources.DimDevice]}
	var id int64
	err := tx.QueryRow(ctx, `SELECT id FROM sources WHERE program_id = $1 AND referrer = $2 AND utm_source = $3 AND utm_medium = $4
		AND utm_campaign = $5 AND landing_page = $6 AND country = $7 AND device = $8`, args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		// A concurrent transaction may intern the same source: the upsert
		// then returns its id (DO UPDATE with no change, so RETURNING answers).
		err = tx.QueryRow(ctx, `INSERT INTO sources (program_id, referrer, utm_source, utm_medium, utm_campaign, landing_page, country, device)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (program_id, referrer, utm_source, utm_medium, utm_campaign, landing_page, country, device)
			DO UPDATE SET program_id = EXCLUDED.program_id RETURNING id`, args...).Scan(&id)
	}
	if err != nil {
		return 0, fmt.Errorf("source of program %d: %w", program, err)
	}
	return id, nil
}

// addKeyed adds one to a counter of a per-source or per-partner bucket
// (table, key and column are the callers' constants, never input); key 0
// (no partner) is not counted.
func addKeyed(ctx context.Context, tx pgx.Tx, table, key string, program, id int64, at time.Time, column string) error {
	switch {
	case table == "source_buckets" && key == "source_id", table == "partner_buckets" && key == "partner_id":
	default:
		return fmt.Errorf("unknown keyed counter table %q/%q", table, key)
	}
	switch column {
	case "clicks", "leads", "conversions":
	default:
		return fmt.Errorf("unknown keyed counter %q", column)
	}
	if id == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (program_id, bucket, `+key+`, `+column+`) VALUES ($1, $2, $3, 1)
		ON CONFLICT (program_id, bucket, `+key+`) DO UPDATE SET `+column+` = `+table+`.`+column+` + 1`, program, bucket(at), id); err != nil {
		return fmt.Errorf("add %s %s of program %d: %w", table, column, program, err)
	}
	return nil
}
