// Package pgstore is the Postgres implementation of ingest.Store and of the
// API-key store over tracking's catalog replica. Every write stores its
// tracking event in the outbox in the same transaction.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// Store implements ingest.Store and apikey.Store.
type Store struct {
	pool      *pgxpool.Pool
	cache     *catalogCache
	clicks    *clickWriter
	foldEvery time.Duration
	logger    *slog.Logger
	// attributions commits concurrent attribution decisions together.
	attributions *pg.Group[attributeCall, ingest.AttributionResult]
}

// Config tunes the store's hot path.
type Config struct {
	Schema string // the service's schema: names the catalog notification channel
	Now    func() time.Time
	Logger *slog.Logger
	// ClickWriters commit click groups in parallel; ClickGroup caps a group.
	ClickWriters int
	ClickGroup   int
	// CounterFold is how often pending click counts reach link_stats and
	// partner_program_metrics (default 200ms).
	CounterFold time.Duration
	// OnAttributionGroup, when set, is told how many attribution calls
	// each transaction decided and its error (nil: committed): metrics.
	OnAttributionGroup func(calls int, err error)
}

// New returns a store; Run must be running for clicks to be written.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if cfg.ClickWriters <= 0 {
		cfg.ClickWriters = 4
	}
	if cfg.ClickGroup <= 0 {
		cfg.ClickGroup = 64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CounterFold <= 0 {
		cfg.CounterFold = 200 * time.Millisecond
	}
	cache, err := catalogsync.NewCache[cacheKey, cacheEntry](pool, catalogsync.CacheConfig{Schema: cfg.Schema, Now: cfg.Now}, cfg.Logger)
	if err != nil {
		return nil, err
	}
	s := &Store{
		pool:      pool,
		foldEvery: cfg.CounterFold,
		logger:    cfg.Logger,
		cache:     cache,
		clicks:    newClickWriter(pool, cfg.ClickWriters, cfg.ClickGroup, cfg.Logger),
	}
	s.attributions = pg.NewGroup(s.attributeGroup, pg.GroupOptions[attributeCall]{Key: attributeKey, Observe: cfg.OnAttributionGroup})
	return s, nil
}

// Run keeps the catalog cache's listener and the click writers going until
// ctx ends.
func (s *Store) Run(ctx context.Context) error {
	runs := []func(context.Context) error{
		s.cache.Run,
		s.clicks.run,
		func(ctx context.Context) error { return runCounterFolder(ctx, s.pool, s.foldEvery, s.logger) },
	}
	errs := make(chan error, len(runs))
	for _, run := range runs {
		go func() { errs <- run(ctx) }()
	}
	var first error
	for range runs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

var (
	_ ingest.Store = (*Store)(nil)
	_ apikey.Store = (*Store)(nil)
)

// LookupKeyByHash finds a program API key in the replica.
func (s *Store) LookupKeyByHash(ctx context.Context, hash []byte) (apikey.Key, error) {
	e, err := s.cache.Get(ctx, cacheKey{kind: "key", code: string(hash)}, func(ctx context.Context) (cacheEntry, error) {
		k, err := catalogsync.LookupAPIKey(ctx, s.pool, hash)
		if errors.Is(err, apikey.ErrKeyNotFound) {
			return cacheEntry{}, nil
		}
		return cacheEntry{found: err == nil, key: k}, err
	})
	if err != nil {
		return apikey.Key{}, err
	}
	if !e.found {
		return apikey.Key{}, apikey.ErrKeyNotFound
	}
	return e.key, nil
}

func (s *Store) Program(ctx context.Context, id int64) (ingest.Program, bool, error) {
	e, err := s.cache.Get(ctx, cacheKey{kind: "program", id: id}, func(ctx context.Context) (cacheEntry, error) {
		p, ok, err := s.loadProgram(ctx, id)
		return cacheEntry{found: ok, prog: p}, err
	})
	return e.prog, e.found, err
}

func (s *Store) loadProgram(ctx context.Context, id int64) (ingest.Program, bool, error) {
	var p ingest.Program
	err := s.pool.QueryRow(ctx, `SELECT id, attribution_window_days, lead_auth_policy, allowed_origins FROM programs WHERE id = $1`, id).
		Scan(&p.ID, &p.AttributionWindowDays, &p.LeadAuthPolicy, &p.AllowedOrigins)
	if errors.Is(err, pgx.ErrNoRows) {
		return ingest.Program{}, false, nil
	}
	if err != nil {
		return ingest.Program{}, false, fmt.Errorf("load program %d: %w", id, err)
	}
	return p, true, nil
}

func (s *Store) AnyProgramAllowsOrigin(ctx context.Context, origin string) (bool, error) {
	e, err := s.cache.Get(ctx, cacheKey{kind: "origin", code: origin}, func(ctx context.Context) (cacheEntry, error) {
		ok, err := s.loadOriginAllowed(ctx, origin)
		return cacheEntry{found: ok}, err
	})
	return e.found, err
}

func (s *Store) loadOriginAllowed(ctx context.Context, origin string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM programs WHERE $1 = ANY (allowed_origins))`, origin).Scan(&ok); err != nil {
		return false, fmt.Errorf("check origin: %w", err)
	}
	return ok, nil
}

// FindLink prefers an active link when a code exists in several programs
// and no program was named, then the oldest.
func (s *Store) FindLink(ctx context.Context, code string, programID int64) (ingest.Link, bool, error) {
	e, err := s.cache.Get(ctx, cacheKey{kind: "link", code: code, id: programID}, func(ctx context.Context) (cacheEntry, error) {
		l, ok, err := s.loadLink(ctx, code, programID)
		return cacheEntry{found: ok, link: l}, err
	})
	return e.link, e.found, err
}

func (s *Store) loadLink(ctx context.Context, code string, programID int64) (ingest.Link, bool, error) {
	var l ingest.Link
	err := s.pool.QueryRow(ctx, `SELECT l.id, l.code, l.partner_id, l.active, p.id IS NOT NULL, l.program_id,
			COALESCE(p.attribution_window_days, 0), COALESCE(p.lead_auth_policy, ''), COALESCE(p.allowed_origins, '{}')
		FROM links l LEFT JOIN programs p ON p.id = l.program_id
		WHERE l.code = $1 AND ($2::bigint = 0 OR l.program_id = $2)
		ORDER BY l.active DESC, l.id LIMIT 1`, code, programID).
		Scan(&l.ID, &l.Code, &l.PartnerID, &l.Active, &l.ProgramKnown, &l.Program.ID,
			&l.Program.AttributionWindowDays, &l.Program.LeadAuthPolicy, &l.Program.AllowedOrigins)
	if errors.Is(err, pgx.ErrNoRows) {
		return ingest.Link{}, false, nil
	}
	if err != nil {
		return ingest.Link{}, false, fmt.Errorf("find link %q: %w", code, err)
	}
	return l, true, nil
}

func ipArg(ip netip.Addr) any {
	if !ip.IsValid() {
		return nil
	}
	return ip.String()
}

// RecordClick hands the click to the group-commit writer and returns once
// the transaction holding it has committed.
func (s *Store) RecordClick(ctx context.Context, rec ingest.ClickRecord) (ingest.ClickResult, error) {
	return s.clicks.submit(ctx, rec)
}

func clickEvent(eventID int64, clickID string, customerID int64, l ingest.Link, firstPartner int64, created, test bool, d ingest.ClickDetails, e ingest.Enrichment, at time.Time) *eventsv1.ClickRecorded {
	return &eventsv1.ClickRecorded{
		EventId: eventID, ClickId: clickID, CustomerId: customerID, ProgramId: l.Program.ID, LinkId: l.ID,
		PartnerId: l.PartnerID, Code: l.Code, IsTest: test, NewCustomer: created, FirstPartnerId: firstPartner,
		Country: e.Country, Region: e.Region, City: e.City, DeviceType: e.DeviceType, Os: e.OS, Browser: e.Browser,
		PageUrl: d.PageURL, ReferrerUrl: d.ReferrerURL, AffiliateUrl: d.AffiliateURL, ClickedAt: timestamppb.New(at),
	}
}

// publish writes one tracking event to the outbox inside tx, without
// NOTIFY: a notifying transaction holds Postgres's cluster-wide
// notification lock through its commit's WAL flush, so every lead and
// conversion would commit one at a time; tracking's relay polls instead
// (server.Spec's RelayPollInterval).
func publish(ctx context.Context, tx pg.Querier, typ string, programID int64, at time.Time, msg proto.Message) error {
	env, err := envelope(typ, programID, at, msg)
	if err != nil {
		return err
	}
	if err := outbox.EnqueueMany(ctx, tx, eventsv1.TopicTracking, []*eventsv1.Envelope{env}); err != nil {
		return fmt.Errorf("enqueue %s: %w", typ, err)
	}
	return nil
}

func envelope(typ string, programID int64, at time.Time, msg proto.Message) (*eventsv1.Envelope, error) {
	payload, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", typ, err)
	}
	return &eventsv1.Envelope{
		Id: outbox.NewEventID(), Type: typ, OccurredAt: timestamppb.New(at), ProgramId: programID,
		Source: "tracking", Payload: payload,
	}, nil
}

func (s *Store) RecordTestClick(ctx context.Context, rec ingest.TestClickRecord) (int64, error) {
	var id int64
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		d, e, l := rec.Details, rec.Enrichment, rec.Link
		if err := tx.QueryRow(ctx, `INSERT INTO affiliate_click_events (program_id, link_id, partner_id, code,
				page_url, page_title, referrer_url, session_id, user_agent, screen_resolution, viewport_size, language, timezone,
				ip, country, region, city, device_type, os, browser, is_test, created_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,true,$21) RETURNING id`,
			rec.ProgramID, l.ID, l.PartnerID, l.Code, d.PageURL, d.PageTitle, d.ReferrerURL, d.SessionID, d.UserAgent,
			d.ScreenResolution, d.ViewportSize, d.Language, d.Timezone, ipArg(rec.IP), e.Country, e.Region, e.City,
			e.DeviceType, e.OS, e.Browser, rec.At).Scan(&id); err != nil {
			return fmt.Errorf("store test click: %w", err)
		}
		l.Program.ID = rec.ProgramID
		ev := clickEvent(id, "", 0, l, 0, false, true, d, e, rec.At)
		ev.ViaApiKey = rec.ViaKey
		return publish(ctx, tx, eventsv1.TypeClickRecorded, rec.ProgramID, rec.At, ev)
	})
	return id, err
}

const customerColumns = `c.id, c.click_id, c.program_id, c.status, c.first_partner_id, COALESCE(c.customer_key, ''),
	c.sale_recorded_at IS NOT NULL,
	EXISTS (SELECT 1 FROM lead_events le WHERE le.customer_id = c.id AND NOT le.is_test AND le.status = 'provisional'),
	COALESCE(p.id, 0), COALESCE(p.attribution_window_days, 0), COALESCE(p.lead_auth_policy, 'server_required'), COALESCE(p.allowed_origins, '{}'),
	c.created_at, c.signup_date, COALESCE(c.processor_customer_id, ''), c.first_link_id, c.first_purchase_date`

func scanCustomer(row pgx.Row) (ingest.Customer, error) {
	var c ingest.Customer
	var signup, firstPurchase *time.Time
	err := row.Scan(&c.ID, &c.ClickID, &c.ProgramID, &c.Status, &c.FirstPartnerID, &c.CustomerKey, &c.SaleRecorded,
		&c.HasProvisional, &c.Program.ID, &c.Program.AttributionWindowDays, &c.Program.LeadAuthPolicy, &c.Program.AllowedOrigins,
		&c.FirstClickAt, &signup, &c.ProcessorCustomerID, &c.FirstLinkID, &firstPurchase)
	if signup != nil {
		c.SignupDate = *signup
	}
	if firstPurchase != nil {
		c.FirstPurchaseDate = *firstPurchase
	}
	return c, err
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// findCustomer looks up by click id, then (with a program) by customer key.
func findCustomer(ctx context.Context, q querier, ref ingest.LeadRef, lock string) (ingest.Customer, bool, error) {
	if ref.ClickID != "" {
		c, err := scanCustomer(q.QueryRow(ctx, `SELECT `+customerColumns+` FROM customers c LEFT JOIN programs p ON p.id = c.program_id
			WHERE c.click_id = $1 `+lock, ref.ClickID))
		if err == nil {
			return c, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return ingest.Customer{}, false, fmt.Errorf("load customer by click id: %w", err)
		}
	}
	if ref.CustomerKey != "" && ref.ProgramID != 0 {
		c, err := scanCustomer(q.QueryRow(ctx, `SELECT `+customerColumns+` FROM customers c LEFT JOIN programs p ON p.id = c.program_id
			WHERE c.program_id = $1 AND c.customer_key = $2 ORDER BY c.id DESC LIMIT 1 `+lock, ref.ProgramID, ref.CustomerKey))
		if err == nil {
			return c, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return ingest.Customer{}, false, fmt.Errorf("load customer by key: %w", err)
		}
	}
	return ingest.Customer{}, false, nil
}

func (s *Store) FindCustomer(ctx context.Context, ref ingest.LeadRef) (ingest.Customer, bool, error) {
	return findCustomer(ctx, s.pool, ref, "")
}

// errNothingToWrite ends a lead transaction that decided to record nothing.
var errNothingToWrite = errors.New("nothing to write")

func (s *Store) Lead(ctx context.Context, ref ingest.LeadRef, at time.Time, decide func(ingest.Customer) (ingest.LeadDecision, error)) (bool, error) {
	found := false
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, ok, err := findCustomer(ctx, tx, ref, "FOR UPDATE OF c")
		if err != nil || !ok {
			return err
		}
		found = true
		d, err := decide(c)
		if err != nil {
			return err
		}
		if !d.Record {
			return errNothingToWrite
		}
		var key any
		if d.CustomerKey != "" {
			key = d.CustomerKey
		}
		var keyID any
		if d.KeyID != 0 {
			keyID = d.KeyID
		}
		ev := &eventsv1.LeadRecorded{CustomerId: c.ID, ClickId: c.ClickID, ProgramId: c.ProgramID, PartnerId: c.FirstPartnerID,
			CustomerKey: d.CustomerKey, ViaApiKey: d.ViaKey, EventName: d.EventName, RecordedAt: timestamppb.New(at)}
		if d.Provisional {
			ev.Status = "provisional"
			if err := tx.QueryRow(ctx, `INSERT INTO lead_events (customer_id, program_id, partner_id, click_id, customer_key,
					email_hash, event_name, status, via_api_key, api_key_id, created_at)
				VALUES ($1,$2,$3,$4,$5,NULLIF($6,''),$7,'provisional',$8,$9,$10) RETURNING id`,
				c.ID, c.ProgramID, c.FirstPartnerID, c.ClickID, key, d.EmailHash, d.EventName, d.ViaKey, keyID, at).Scan(&ev.EventId); err != nil {
				return fmt.Errorf("store provisional lead: %w", err)
			}
			return publish(ctx, tx, eventsv1.TypeLeadRecorded, c.ProgramID, at, ev)
		}
		return settleLead(ctx, tx, c, d, at)
	})
	if errors.Is(err, errNothingToWrite) {
		err = nil
	}
	return found, err
}

// settleLead moves the customer to lead: its provisional lead settles, or a
// settled one is stored; the customer key is saved and the partner's lead
// count grows.
func settleLead(ctx context.Context, tx pg.Querier, c ingest.Customer, d ingest.LeadDecision, at time.Time) error {
	var key, keyID any
	if d.CustomerKey != "" {
		key = d.CustomerKey
	}
	if d.KeyID != 0 {
		keyID = d.KeyID
	}
	ev := &eventsv1.LeadRecorded{CustomerId: c.ID, ClickId: c.ClickID, ProgramId: c.ProgramID, PartnerId: c.FirstPartnerID,
		CustomerKey: d.CustomerKey, ViaApiKey: d.ViaKey, EventName: d.EventName, RecordedAt: timestamppb.New(at),
		Status: "settled", SignupDate: timestamppb.New(at)}
	var err error
	if c.HasProvisional {
		err = tx.QueryRow(ctx, `UPDATE lead_events SET status = 'settled', settled_at = $2, via_api_key = $3,
				api_key_id = COALESCE($4, api_key_id), customer_key = COALESCE($5, customer_key),
				email_hash = COALESCE(NULLIF($6, ''), email_hash)
			WHERE customer_id = $1 AND NOT is_test RETURNING id`, c.ID, at, d.ViaKey, keyID, key, d.EmailHash).Scan(&ev.EventId)
	} else {
		err = tx.QueryRow(ctx, `INSERT INTO lead_events (customer_id, program_id, partner_id, click_id, customer_key,
				email_hash, event_name, status, via_api_key, api_key_id, created_at, settled_at)
			VALUES ($1,$2,$3,$4,$5,NULLIF($6,''),$7,'settled',$8,$9,$10,$10) RETURNING id`,
			c.ID, c.ProgramID, c.FirstPartnerID, c.ClickID, key, d.EmailHash, d.EventName, d.ViaKey, keyID, at).Scan(&ev.EventId)
	}
	if err != nil {
		return fmt.Errorf("settle lead: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE customers SET status = 'lead', signup_date = $2, customer_key = COALESCE($3, customer_key),
			email_hash = COALESCE(NULLIF($4, ''), email_hash), updated_at = $2 WHERE id = $1`, c.ID, at, key, d.EmailHash)
	b.Queue(`INSERT INTO partner_program_metrics (program_id, partner_id, leads) VALUES ($1, $2, 1)
		ON CONFLICT (program_id, partner_id) DO UPDATE SET leads = partner_program_metrics.leads + 1`, c.ProgramID, c.FirstPartnerID)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("settle lead: %w", err)
	}
	return publish(ctx, tx, eventsv1.TypeLeadRecorded, c.ProgramID, at, ev)
}

func (s *Store) RecordTestLead(ctx context.Context, rec ingest.TestLeadRecord) (int64, error) {
	var id int64
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var customer, keyID any
		if rec.CustomerID != 0 {
			customer = rec.CustomerID
		}
		if rec.KeyID != 0 {
			keyID = rec.KeyID
		}
		if err := tx.QueryRow(ctx, `INSERT INTO lead_events (customer_id, program_id, click_id, customer_key, email_hash,
				event_name, status, is_test, via_api_key, api_key_id, created_at, settled_at)
			VALUES ($1,$2,NULLIF($3,''),NULLIF($4,''),NULLIF($5,''),$6,'settled',true,$7,$8,$9,$9) RETURNING id`,
			customer, rec.ProgramID, rec.ClickID, rec.CustomerKey, rec.EmailHash, rec.EventName, rec.ViaKey, keyID, rec.At).Scan(&id); err != nil {
			return fmt.Errorf("store test lead: %w", err)
		}
		return publish(ctx, tx, eventsv1.TypeLeadRecorded, rec.ProgramID, rec.At, &eventsv1.LeadRecorded{
			EventId: id, CustomerId: rec.CustomerID, ClickId: rec.ClickID, ProgramId: rec.ProgramID, CustomerKey: rec.CustomerKey,
			Status: "settled", IsTest: true, ViaApiKey: rec.ViaKey, EventName: rec.EventName, RecordedAt: timestamppb.New(rec.At),
		})
	})
	return id, err
}

func (s *Store) RecordVisit(ctx context.Context, v ingest.Visit) (int64, error) {
	var id int64
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO visits (program_id, click_id, page_url, referrer_url, session_id, ip, created_at)
			VALUES ($1, NULLIF($2,''), $3, $4, $5, $6, $7) RETURNING id`,
			v.ProgramID, v.ClickID, v.PageURL, v.ReferrerURL, v.SessionID, ipArg(v.IP), v.At).Scan(&id); err != nil {
			return fmt.Errorf("store visit: %w", err)
		}
		return publish(ctx, tx, eventsv1.TypeVisitRecorded, v.ProgramID, v.At, &eventsv1.VisitRecorded{
			EventId: id, ProgramId: v.ProgramID, ClickId: v.ClickID, PageUrl: v.PageURL, ReferrerUrl: v.ReferrerURL,
			VisitedAt: timestamppb.New(v.At),
		})
	})
	return id, err
}
