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
	if _, err := tx.Exec(ctx, `
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
			ON CONFLICT (customer_id) DO UPDATE SET source_id = EXCLUDED.source_id WHERE $7::boolean
		)
		SELECT 1`, ev.GetEventId(), program, bucket(at), utcDay(at), ev.GetPartnerId(), ev.GetCustomerId(), ev.GetNewCustomer(),
		d[sources.DimReferrer], d[sources.DimUTMSource], d[sources.DimUTMMedium], d[sources.DimUTMCampaign],
		d[sources.DimLandingPage], d[sources.DimCountry], d[sources.DimDevice]); err != nil {
		return fmt.Errorf("count click %d of program %d: %w", ev.GetEventId(), program, err)
	}
	return nil
}

// saleSource credits a paid sale's revenue to its customer's source and to
// the partner the sale was attributed to.
func saleSource(ctx context.Context, tx pgx.Tx, ev *eventsv1.LedgerSaleRecorded) error {
	program, at := ev.GetProgramId(), ev.GetOccurredAt().AsTime()
	source, err := customerSource(ctx, tx, program, ev.GetCustomerId())
	if err != nil {
		return err
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
// customer whose click is unknown (created before analytics kept sources,
// or by a lead without a click) is credited to the empty source: direct,
// no UTM, unknown page, country and device.
func customerSource(ctx context.Context, tx pgx.Tx, program, customer int64) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `SELECT source_id FROM customer_sources WHERE customer_id = $1`, customer).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return internSource(ctx, tx, program, sources.FromClick("", "", "", ""))
	}
	if err != nil {
		return 0, fmt.Errorf("source of customer %d: %w", customer, err)
	}
	return id, nil
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
