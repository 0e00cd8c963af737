package consumer

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/analytics/internal/sources"
)

// TrackingBatch applies a batch of tracking's events in one transaction:
// the real clicks (most of them) folded into one write per table, then
// every other event in order as Tracking applies it. Clicks first is safe:
// a lead or a conversion names a customer its click created earlier.
// The figures are those Tracking makes event by event (TestRebuild compares
// a live, batched generation with a rebuilt one).
func TrackingBatch(ctx context.Context, tx pgx.Tx, envs []*eventsv1.Envelope) error {
	if err := shareFigures(ctx, tx); err != nil {
		return err
	}
	var clicks []*eventsv1.ClickRecorded
	var rest []*eventsv1.Envelope
	for _, env := range envs {
		if env.GetType() != eventsv1.TypeClickRecorded {
			rest = append(rest, env)
			continue
		}
		ev := &eventsv1.ClickRecorded{}
		if err := proto.Unmarshal(env.GetPayload(), ev); err != nil {
			return fmt.Errorf("decode %s: %w", env.GetType(), err)
		}
		if ev.GetIsTest() {
			rest = append(rest, env)
			continue
		}
		clicks = append(clicks, ev)
	}
	if err := foldClicks(ctx, tx, clicks); err != nil {
		return err
	}
	// Each program's newest click of the batch (one row a program: an
	// INSERT ... ON CONFLICT may not touch a row twice).
	newest := map[int64]latest{}
	for _, c := range clicks {
		e := latest{c.GetProgramId(), c.GetEventId(), c.GetClickedAt().AsTime()}
		if had, ok := newest[e.program]; !ok || had.at.Before(e.at) || (had.at.Equal(e.at) && had.id < e.id) {
			newest[e.program] = e
		}
	}
	evs := make([]latest, 0, len(newest))
	for _, e := range newest {
		evs = append(evs, e)
	}
	if err := noteLatest(ctx, tx, "click", evs); err != nil {
		return err
	}
	for _, env := range rest {
		if err := Tracking(ctx, tx, env); err != nil {
			return err
		}
	}
	return nil
}

type (
	bucketKey struct {
		program, key int64
		at           time.Time
	}
	sourceKey struct {
		program int64
		dims    [7]string
	}
	customerAt struct {
		source  int64
		created bool
	}
)

// foldClicks counts real clicks once each (counted), then adds them per
// bucket, per day, per source and per partner in one statement per table,
// and remembers the customers' sources.
func foldClicks(ctx context.Context, tx pgx.Tx, clicks []*eventsv1.ClickRecorded) error {
	if len(clicks) == 0 {
		return nil
	}
	ids := make([]int64, len(clicks))
	for i, c := range clicks {
		ids[i] = c.GetEventId()
	}
	rows, err := tx.Query(ctx, `INSERT INTO counted (kind, id) SELECT 'click', unnest($1::bigint[]) ON CONFLICT DO NOTHING RETURNING id`, ids)
	if err != nil {
		return fmt.Errorf("count clicks: %w", err)
	}
	fresh, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("count clicks: %w", err)
	}
	todo := make(map[int64]bool, len(fresh))
	for _, id := range fresh {
		todo[id] = true
	}
	buckets, days, bySource, byPartner := map[bucketKey]int64{}, map[bucketKey]int64{}, map[bucketKey]int64{}, map[bucketKey]int64{}
	interned := map[sourceKey]int64{}
	customers := map[int64]customerAt{}
	var order []int64 // customers in first-seen order
	for _, c := range clicks {
		if !todo[c.GetEventId()] {
			continue
		}
		delete(todo, c.GetEventId())
		program, at := c.GetProgramId(), c.GetClickedAt().AsTime()
		landing := c.GetPageUrl()
		if landing == "" {
			landing = c.GetAffiliateUrl()
		}
		d := sources.FromClick(landing, c.GetReferrerUrl(), c.GetCountry(), c.GetDeviceType())
		sk := sourceKey{program, [7]string{d[sources.DimReferrer], d[sources.DimUTMSource], d[sources.DimUTMMedium], d[sources.DimUTMCampaign],
			d[sources.DimLandingPage], d[sources.DimCountry], d[sources.DimDevice]}}
		source, ok := interned[sk]
		if !ok {
			if source, err = internSource(ctx, tx, program, d); err != nil {
				return err
			}
			interned[sk] = source
		}
		b := bucket(at)
		buckets[bucketKey{program, 0, b}]++
		days[bucketKey{program, 0, utcDay(at)}]++
		bySource[bucketKey{program, source, b}]++
		if p := c.GetPartnerId(); p != 0 {
			byPartner[bucketKey{program, p, b}]++
		}
		if cust := c.GetCustomerId(); cust != 0 {
			had, seen := customers[cust]
			switch {
			case !seen:
				customers[cust] = customerAt{source, c.GetNewCustomer()}
				order = append(order, cust)
			case c.GetNewCustomer() && !had.created:
				// The click that created the customer names its source.
				customers[cust] = customerAt{source, true}
			}
		}
	}
	if err := upsertCounts(ctx, tx, `INSERT INTO activity_buckets (program_id, bucket, clicks)
		SELECT p, b, n FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bigint[]) AS t (p, k, b, n)
		ON CONFLICT (program_id, bucket) DO UPDATE SET clicks = activity_buckets.clicks + EXCLUDED.clicks`, buckets); err != nil {
		return fmt.Errorf("add clicks: %w", err)
	}
	if err := upsertCounts(ctx, tx, `INSERT INTO activity_days (program_id, day, clicks)
		SELECT p, (b AT TIME ZONE 'UTC')::date, n FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bigint[]) AS t (p, k, b, n)
		ON CONFLICT (program_id, day) DO UPDATE SET clicks = activity_days.clicks + EXCLUDED.clicks`, days); err != nil {
		return fmt.Errorf("add daily clicks: %w", err)
	}
	if err := upsertCounts(ctx, tx, `INSERT INTO source_buckets (program_id, bucket, source_id, clicks)
		SELECT p, b, k, n FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bigint[]) AS t (p, k, b, n)
		ON CONFLICT (program_id, bucket, source_id) DO UPDATE SET clicks = source_buckets.clicks + EXCLUDED.clicks`, bySource); err != nil {
		return fmt.Errorf("add clicks by source: %w", err)
	}
	if err := upsertCounts(ctx, tx, `INSERT INTO partner_buckets (program_id, bucket, partner_id, clicks)
		SELECT p, b, k, n FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bigint[]) AS t (p, k, b, n)
		ON CONFLICT (program_id, bucket, partner_id) DO UPDATE SET clicks = partner_buckets.clicks + EXCLUDED.clicks`, byPartner); err != nil {
		return fmt.Errorf("add clicks by partner: %w", err)
	}
	var created, reused [2][]int64
	for _, cust := range order {
		c := customers[cust]
		if c.created {
			created[0], created[1] = append(created[0], cust), append(created[1], c.source)
		} else {
			reused[0], reused[1] = append(reused[0], cust), append(reused[1], c.source)
		}
	}
	// The customers whose provisional source is replaced now: money of
	// their sales applied before (another topic) moves under the new one.
	var set [2][]int64
	for _, q := range []struct {
		rows     [2][]int64
		conflict string
	}{
		{created, `DO UPDATE SET source_id = EXCLUDED.source_id, provisional = false`},
		// A reused customer's click sets the source only of a customer
		// without one, or with a sale's provisional one (claimSource).
		{reused, `DO UPDATE SET source_id = EXCLUDED.source_id, provisional = false WHERE customer_sources.provisional`},
	} {
		if len(q.rows[0]) == 0 {
			continue
		}
		rows, err := tx.Query(ctx, `INSERT INTO customer_sources (customer_id, source_id) SELECT * FROM unnest($1::bigint[], $2::bigint[])
			ON CONFLICT (customer_id) `+q.conflict+` RETURNING customer_id, source_id, xmax = 0`, q.rows[0], q.rows[1])
		if err != nil {
			return fmt.Errorf("customers' sources: %w", err)
		}
		var cust, src int64
		var inserted bool
		if _, err := pgx.ForEachRow(rows, []any{&cust, &src, &inserted}, func() error {
			// A row just inserted (xmax 0) had no sale's provisional claim,
			// which every unsourced sale makes: nothing to move.
			if !inserted {
				set[0], set[1] = append(set[0], cust), append(set[1], src)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("customers' sources: %w", err)
		}
	}
	if len(set[0]) == 0 {
		return nil
	}
	return moveUnsourced(ctx, tx, set[0], set[1])
}

// upsertCounts runs an unnest upsert of counts by key, in key order (so two
// writers of the same rows lock them in one order).
func upsertCounts(ctx context.Context, tx pgx.Tx, sql string, counts map[bucketKey]int64) error {
	if len(counts) == 0 {
		return nil
	}
	keys := make([]bucketKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		switch {
		case a.program != b.program:
			return a.program < b.program
		case !a.at.Equal(b.at):
			return a.at.Before(b.at)
		}
		return a.key < b.key
	})
	programs, ks, ats, ns := make([]int64, len(keys)), make([]int64, len(keys)), make([]time.Time, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		programs[i], ks[i], ats[i], ns[i] = k.program, k.key, k.at, counts[k]
	}
	_, err := tx.Exec(ctx, sql, programs, ks, ats, ns)
	return err
}
