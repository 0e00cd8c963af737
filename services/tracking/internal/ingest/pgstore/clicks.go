package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// clickWriter commits clicks in groups: each request hands its click to a
// writer and waits for the transaction that holds it to commit, so the
// answer still follows a durable write, but concurrent clicks share one
// transaction (customers, click events, counters and outbox rows written
// with one statement each). One transaction per click is what limits a
// single-row-insert design on a small machine; grouping is how the click
// route keeps up with a bare insert. A group that fails is retried one
// click at a time, so one bad click never fails its neighbours.
type clickWriter struct {
	pool     *pgxpool.Pool
	jobs     chan *clickJob
	stopped  chan struct{}
	workers  int
	maxBatch int
	logger   *slog.Logger
}

type clickJob struct {
	rec  ingest.ClickRecord
	res  ingest.ClickResult
	err  error
	done chan struct{}
}

var errWriterStopped = errors.New("click writer stopped")

func newClickWriter(pool *pgxpool.Pool, workers, maxBatch int, logger *slog.Logger) *clickWriter {
	return &clickWriter{
		pool: pool, jobs: make(chan *clickJob), stopped: make(chan struct{}),
		workers: workers, maxBatch: maxBatch, logger: logger,
	}
}

// submit hands a click to a writer and waits for its commit.
func (w *clickWriter) submit(ctx context.Context, rec ingest.ClickRecord) (ingest.ClickResult, error) {
	j := &clickJob{rec: rec, done: make(chan struct{})}
	select {
	case w.jobs <- j:
	case <-w.stopped:
		return ingest.ClickResult{}, errWriterStopped
	case <-ctx.Done():
		return ingest.ClickResult{}, ctx.Err()
	}
	// Once taken, the job is always finished by its writer, even if the
	// client has gone: wait for it so the answer matches what committed.
	<-j.done
	return j.res, j.err
}

// run starts the writers and blocks until ctx ends and they have finished
// their groups.
func (w *clickWriter) run(ctx context.Context) error {
	done := make(chan struct{}, w.workers)
	for i := 0; i < w.workers; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				var first *clickJob
				select {
				case <-ctx.Done():
					return
				case first = <-w.jobs:
				}
				group := []*clickJob{first}
			drain:
				for len(group) < w.maxBatch {
					select {
					case j := <-w.jobs:
						group = append(group, j)
					default:
						break drain
					}
				}
				w.commit(group)
			}
		}()
	}
	<-ctx.Done()
	close(w.stopped)
	for i := 0; i < w.workers; i++ {
		<-done
	}
	return nil
}

func (w *clickWriter) commit(group []*clickJob) {
	// Not the request's context: a group serves many requests, and a click
	// taken must be finished.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := w.write(ctx, group)
	if err != nil && len(group) > 1 {
		w.logger.Warn("click group failed; retrying its clicks one by one", "clicks", len(group), "err", err)
		for _, j := range group {
			j.err = w.write(ctx, []*clickJob{j})
			close(j.done)
		}
		return
	}
	for _, j := range group {
		j.err = err
		close(j.done)
	}
}

// write stores group in one transaction. An error does not always mean
// nothing was stored: when the connection drops after COMMIT was sent, the
// server may have committed without the answer arriving. Writing the
// group again would then record every click twice, so after an error the
// group's click events (their ids were allocated inside the transaction)
// are looked up: all there means committed, none there means rolled back.
func (w *clickWriter) write(ctx context.Context, group []*clickJob) error {
	for _, j := range group {
		j.res.EventID = 0
	}
	err := pg.InTx(ctx, w.pool, func(tx pgx.Tx) error { return writeClicks(ctx, tx, group) })
	if err == nil {
		return nil
	}
	ids := make([]int64, 0, len(group))
	for _, j := range group {
		if j.res.EventID == 0 {
			// Failed before its events were built: nothing can have
			// committed.
			return err
		}
		ids = append(ids, j.res.EventID)
	}
	committed, cerr := w.committed(ctx, ids)
	if cerr != nil {
		// Unknown outcome: report the failure rather than risk a second copy.
		return fmt.Errorf("%w (and whether it committed is unknown: %v)", err, cerr)
	}
	if committed {
		w.logger.Warn("click group committed although its commit reported an error", "clicks", len(group), "err", err)
		return nil
	}
	return err
}

// committed reports whether the click events ids were stored, retrying
// while the database is unreachable (the error that brought us here is
// usually a dropped connection) until ctx ends.
func (w *clickWriter) committed(ctx context.Context, ids []int64) (bool, error) {
	backoff := 20 * time.Millisecond
	for {
		var n int
		err := w.pool.QueryRow(ctx, `SELECT count(*) FROM affiliate_click_events WHERE id = ANY($1)`, ids).Scan(&n)
		switch {
		case err == nil && n == len(ids):
			return true, nil
		case err == nil && n == 0:
			return false, nil
		case err == nil:
			return false, fmt.Errorf("%d of the group's %d click events stored", n, len(ids))
		case !pg.IsTransient(err):
			return false, fmt.Errorf("look up click events: %w", err)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("look up click events: %w", err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

type plannedCustomer struct {
	clickID   string
	programID int64
	partnerID int64
	linkID    int64
	at        time.Time
	id        int64
}

// writeClicks stores a group of clicks in tx: customers resolved or created
// by the existing_click_id rules, click events, link and partner-program
// counters, and one ClickRecorded event per click.
func writeClicks(ctx context.Context, tx pgx.Tx, group []*clickJob) error {
	// 1. Customers that already hold an existing click id.
	var wanted []string
	for _, j := range group {
		if j.rec.ExistingClickID != "" {
			wanted = append(wanted, j.rec.ExistingClickID)
		}
	}
	type known struct{ id, program, firstPartner int64 }
	existing := map[string]known{}
	if len(wanted) > 0 {
		rows, err := tx.Query(ctx, `SELECT click_id, id, program_id, first_partner_id FROM customers WHERE click_id = ANY($1)`, wanted)
		if err != nil {
			return fmt.Errorf("load customers: %w", err)
		}
		for rows.Next() {
			var cid string
			var k known
			if err := rows.Scan(&cid, &k.id, &k.program, &k.firstPartner); err != nil {
				rows.Close()
				return fmt.Errorf("scan customer: %w", err)
			}
			existing[cid] = k
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("load customers: %w", err)
		}
	}
	// 2. Decide per click: reuse, adopt the sent id, or make a new one.
	planned := map[string]*plannedCustomer{}
	var order []*plannedCustomer
	for _, j := range group {
		l := j.rec.Link
		cid := j.rec.ExistingClickID
		if k, ok := existing[cid]; ok && cid != "" {
			if !j.rec.ProgramScoped || k.program == l.Program.ID {
				j.res = ingest.ClickResult{ClickID: cid, CustomerID: k.id}
				continue
			}
			cid = "" // another program's visitor: start afresh
		}
		if cid != "" {
			if _, ok := planned[cid]; ok {
				// An earlier click of this group creates it.
				j.res = ingest.ClickResult{ClickID: cid}
				continue
			}
		} else {
			cid = j.rec.NewClickID()
		}
		p := &plannedCustomer{clickID: cid, programID: l.Program.ID, partnerID: l.PartnerID, linkID: l.ID, at: j.rec.At}
		planned[cid] = p
		order = append(order, p)
		j.res = ingest.ClickResult{ClickID: cid, NewCustomer: true}
	}
	// 3. Create the new customers in click-id order (one lock order for
	// every writer), then pick up any that a concurrent group created first.
	created := &pgx.Batch{}
	if len(order) > 0 {
		sort.Slice(order, func(a, b int) bool { return order[a].clickID < order[b].clickID })
		ids := make([]string, len(order))
		programs := make([]int64, len(order))
		partners := make([]int64, len(order))
		links := make([]int64, len(order))
		ats := make([]time.Time, len(order))
		for i, p := range order {
			ids[i], programs[i], partners[i], links[i], ats[i] = p.clickID, p.programID, p.partnerID, p.linkID, p.at
		}
		created.Queue(`INSERT INTO customers (click_id, program_id, first_partner_id, first_link_id, created_at, updated_at)
			SELECT c, p, pa, l, a, a FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::timestamptz[]) AS t(c, p, pa, l, a)
			ORDER BY c
			ON CONFLICT (click_id) DO NOTHING RETURNING click_id, id`, ids, programs, partners, links, ats).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var cid string
					var id int64
					if err := rows.Scan(&cid, &id); err != nil {
						return fmt.Errorf("scan new customer: %w", err)
					}
					planned[cid].id = id
				}
				return rows.Err()
			})
	}
	// Event ids are allocated in the same round trip.
	var eventIDs []int64
	created.Queue(`SELECT nextval(pg_get_serial_sequence('affiliate_click_events', 'id')) FROM generate_series(1, $1)`, len(group)).
		Query(func(rows pgx.Rows) error {
			var err error
			eventIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		})
	if err := tx.SendBatch(ctx, created).Close(); err != nil {
		return fmt.Errorf("create customers: %w", err)
	}
	if len(eventIDs) != len(group) {
		return fmt.Errorf("allocate click event ids: got %d of %d", len(eventIDs), len(group))
	}
	for _, p := range order {
		if p.id != 0 {
			continue
		}
		// Created by a concurrent group meanwhile: reuse it.
		var program, firstPartner int64
		if err := tx.QueryRow(ctx, `SELECT id, program_id, first_partner_id FROM customers WHERE click_id = $1`, p.clickID).
			Scan(&p.id, &program, &firstPartner); err != nil {
			return fmt.Errorf("load concurrently created customer: %w", err)
		}
		p.partnerID = firstPartner
		for _, j := range group {
			if j.res.ClickID == p.clickID {
				j.res.NewCustomer = false
			}
		}
	}
	firstPartner := func(j *clickJob) int64 {
		if p, ok := planned[j.res.ClickID]; ok {
			return p.partnerID
		}
		return existing[j.res.ClickID].firstPartner
	}
	for _, j := range group {
		if p, ok := planned[j.res.ClickID]; ok {
			j.res.CustomerID = p.id
		}
	}
	// 4. Events, counter deltas and outbox rows in one round trip.
	n := len(group)
	cols := struct {
		id, customer, program, link, partner                     []int64
		clickID, code, page, title, ref, sess, ua, screen, view  []string
		lang, tz, country, region, city, device, osName, browser []string
		ip                                                       []*string
		at                                                       []time.Time
	}{}
	envs := make([]*eventsv1.Envelope, 0, n)
	for i, j := range group {
		r, d, e, l := j.rec, j.rec.Details, j.rec.Enrichment, j.rec.Link
		j.res.EventID = eventIDs[i]
		var ip *string
		if r.IP.IsValid() {
			s := r.IP.String()
			ip = &s
		}
		cols.id = append(cols.id, eventIDs[i])
		cols.customer = append(cols.customer, j.res.CustomerID)
		cols.program = append(cols.program, l.Program.ID)
		cols.link = append(cols.link, l.ID)
		cols.partner = append(cols.partner, l.PartnerID)
		cols.clickID = append(cols.clickID, j.res.ClickID)
		cols.code = append(cols.code, l.Code)
		cols.page = append(cols.page, d.PageURL)
		cols.title = append(cols.title, d.PageTitle)
		cols.ref = append(cols.ref, d.ReferrerURL)
		cols.sess = append(cols.sess, d.SessionID)
		cols.ua = append(cols.ua, d.UserAgent)
		cols.screen = append(cols.screen, d.ScreenResolution)
		cols.view = append(cols.view, d.ViewportSize)
		cols.lang = append(cols.lang, d.Language)
		cols.tz = append(cols.tz, d.Timezone)
		cols.ip = append(cols.ip, ip)
		cols.country = append(cols.country, e.Country)
		cols.region = append(cols.region, e.Region)
		cols.city = append(cols.city, e.City)
		cols.device = append(cols.device, e.DeviceType)
		cols.osName = append(cols.osName, e.OS)
		cols.browser = append(cols.browser, e.Browser)
		cols.at = append(cols.at, r.At)
		payload, err := proto.Marshal(clickEvent(eventIDs[i], j.res.ClickID, j.res.CustomerID, l, firstPartner(j), j.res.NewCustomer, false, d, e, r.At))
		if err != nil {
			return fmt.Errorf("marshal click event: %w", err)
		}
		envs = append(envs, &eventsv1.Envelope{
			Id: outbox.NewEventID(), Type: eventsv1.TypeClickRecorded, OccurredAt: timestamppb.New(r.At),
			ProgramId: l.Program.ID, Source: "tracking", Payload: payload,
		})
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO affiliate_click_events (id, customer_id, program_id, link_id, partner_id, click_id, code,
			page_url, page_title, referrer_url, session_id, user_agent, screen_resolution, viewport_size, language, timezone,
			ip, country, region, city, device_type, os, browser, is_test, created_at)
		SELECT id, cu, pr, li, pa, ci, co, pu, pt, rf, se, ua, sc, vp, la, tz, ip::inet, ct, rg, cy, dv, os, br, false, at
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[],
			$9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[],
			$18::text[], $19::text[], $20::text[], $21::text[], $22::text[], $23::text[], $24::timestamptz[])
			AS t(id, cu, pr, li, pa, ci, co, pu, pt, rf, se, ua, sc, vp, la, tz, ip, ct, rg, cy, dv, os, br, at)`,
		cols.id, cols.customer, cols.program, cols.link, cols.partner, cols.clickID, cols.code, cols.page, cols.title, cols.ref,
		cols.sess, cols.ua, cols.screen, cols.view, cols.lang, cols.tz, cols.ip, cols.country, cols.region, cols.city,
		cols.device, cols.osName, cols.browser, cols.at)
	// Counter increments go to the delta table; the folder moves them.
	b.Queue(`INSERT INTO click_count_deltas (link_id, program_id, partner_id, clicks, last_clicked)
		SELECT li, pr, pa, count(*), max(at) FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::timestamptz[]) AS t(li, pr, pa, at)
		GROUP BY li, pr, pa`, cols.link, cols.program, cols.partner, cols.at)
	if err := outbox.QueueMany(ctx, b, eventsv1.TopicTracking, envs); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store clicks: %w", err)
	}
	return nil
}
