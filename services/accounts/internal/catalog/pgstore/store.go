// Package pgstore is the Postgres implementation of catalog.Store. Each write
// stores the entity and its catalog event (outbox row) in one transaction.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// Catalog events go to eventsv1.TopicCatalog keyed by program id. Each
// carries the entity's full current state, so applying one twice or late is
// harmless.

// Store implements catalog.Store.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

func New(pool *pgxpool.Pool, now func() time.Time) *Store {
	return &Store{pool: pool, now: now}
}

var _ catalog.Store = (*Store)(nil)

// publish takes the next catalog sequence number and writes the event to the
// outbox inside tx.
func (s *Store) publish(ctx context.Context, tx pgx.Tx, typ string, programID int64, msg proto.Message) (catalog.Seq, error) {
	var seq int64
	var epoch string
	if err := tx.QueryRow(ctx, `UPDATE catalog_seq SET seq = seq + 1 RETURNING seq, epoch`).Scan(&seq, &epoch); err != nil {
		return 0, fmt.Errorf("next catalog seq: %w", err)
	}
	payload, err := proto.Marshal(msg)
	if err != nil {
		return 0, fmt.Errorf("marshal %s: %w", typ, err)
	}
	env := &eventsv1.Envelope{
		Id:         outbox.NewEventID(),
		Type:       typ,
		OccurredAt: timestamppb.New(s.now()),
		ProgramId:  programID,
		Seq:        seq,
		Epoch:      epoch,
		Source:     "accounts",
		Payload:    payload,
	}
	if _, err := outbox.Enqueue(ctx, tx, eventsv1.TopicCatalog, env); err != nil {
		return 0, fmt.Errorf("enqueue %s: %w", typ, err)
	}
	return catalog.Seq(seq), nil
}

// write runs fn in a transaction and translates constraint violations.
func (s *Store) write(ctx context.Context, fn func(pgx.Tx) error) error {
	err := pg.InTx(ctx, s.pool, fn)
	switch {
	case err == nil:
		return nil
	case pg.IsUniqueViolation(err):
		return &catalog.ConflictError{Message: conflictMessage(pg.ConstraintName(err))}
	case pg.IsForeignKeyViolation(err):
		return &catalog.NotFoundError{What: fkTarget(pg.ConstraintName(err))}
	}
	return err
}

func conflictMessage(constraint string) string {
	switch constraint {
	case "links_program_code_key":
		return "a link with this code already exists in this program"
	case "users_email_key":
		return "a user with this email already exists"
	case "partner_programs_program_id_partner_id_key":
		return "this partner is already in this program"
	case "memberships_pkey":
		return "this user is already a member of this program"
	}
	return "already exists"
}

func fkTarget(constraint string) string {
	switch constraint {
	case "users_advertiser_id_fkey", "programs_advertiser_id_fkey":
		return "advertiser"
	case "memberships_user_id_fkey":
		return "user"
	case "partner_programs_partner_id_fkey", "links_partner_id_fkey":
		return "partner"
	}
	return "program"
}

func notFound(what string, id int64) error {
	return &catalog.NotFoundError{What: fmt.Sprintf("%s %d", what, id)}
}

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func tsPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func (s *Store) CreateAdvertiser(ctx context.Context, a catalog.Advertiser) (catalog.Advertiser, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO advertisers (name, email) VALUES ($1, $2) RETURNING id, created_at`,
			a.Name, a.Email).Scan(&a.ID, &a.CreatedAt); err != nil {
			return fmt.Errorf("insert advertiser: %w", err)
		}
		var err error
		seq, err = s.publish(ctx, tx, eventsv1.TypeAdvertiserUpserted, 0, &eventsv1.Advertiser{
			Id: a.ID, Name: a.Name, Email: a.Email, CreatedAt: ts(a.CreatedAt),
		})
		return err
	})
	return a, seq, err
}

func (s *Store) CreateUser(ctx context.Context, u catalog.User) (catalog.User, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		var adv *int64
		if u.AdvertiserID != 0 {
			adv = &u.AdvertiserID
		}
		if err := tx.QueryRow(ctx, `INSERT INTO users (email, name, advertiser_id, blocked) VALUES ($1, $2, $3, $4) RETURNING id, created_at`,
			u.Email, u.Name, adv, u.Blocked).Scan(&u.ID, &u.CreatedAt); err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		var err error
		seq, err = s.publish(ctx, tx, eventsv1.TypeUserUpserted, 0, userEvent(u))
		return err
	})
	return u, seq, err
}

func userEvent(u catalog.User) *eventsv1.User {
	return &eventsv1.User{Id: u.ID, Email: u.Email, Name: u.Name, AdvertiserId: u.AdvertiserID, Blocked: u.Blocked, CreatedAt: ts(u.CreatedAt)}
}

func (s *Store) GetUser(ctx context.Context, id int64) (catalog.User, error) {
	var u catalog.User
	var adv *int64
	err := s.pool.QueryRow(ctx, `SELECT id, email, name, advertiser_id, blocked, created_at FROM users WHERE id = $1`, id).
		Scan(&u.ID, &u.Email, &u.Name, &adv, &u.Blocked, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.User{}, notFound("user", id)
	}
	if err != nil {
		return catalog.User{}, fmt.Errorf("load user %d: %w", id, err)
	}
	if adv != nil {
		u.AdvertiserID = *adv
	}
	return u, nil
}

const programColumns = `id, advertiser_id, name, domain, commission_type, commission_rate::text, duration_months,
	cookie_duration, attribution_window_days, hold_days, lead_auth_policy, payment_tracking_mode,
	processor_status, processor_account_id, charges_enabled, payouts_enabled, details_submitted, connected_at,
	allowed_origins, currency, trim_scale(lead_commission)::text, created_at, updated_at`

func scanProgram(row pgx.Row) (catalog.Program, error) {
	var p catalog.Program
	err := row.Scan(&p.ID, &p.AdvertiserID, &p.Name, &p.Domain, &p.CommissionType, &p.CommissionRate, &p.DurationMonths,
		&p.CookieDuration, &p.AttributionWindowDays, &p.HoldDays, &p.LeadAuthPolicy, &p.PaymentTrackingMode,
		&p.Processor.Status, &p.Processor.AccountID, &p.Processor.ChargesEnabled, &p.Processor.PayoutsEnabled,
		&p.Processor.DetailsSubmitted, &p.Processor.ConnectedAt, &p.AllowedOrigins, &p.Currency, &p.LeadCommission,
		&p.CreatedAt, &p.UpdatedAt)
	return p, err
}

func programEvent(p catalog.Program) *eventsv1.Program {
	ev := &eventsv1.Program{
		Id:                    p.ID,
		AdvertiserId:          p.AdvertiserID,
		Name:                  p.Name,
		Domain:                p.Domain,
		CommissionType:        p.CommissionType,
		CommissionRate:        p.CommissionRate,
		DurationMonths:        int32(p.DurationMonths),
		AttributionWindowDays: int32(p.AttributionWindowDays),
		HoldDays:              int32(p.HoldDays),
		LeadAuthPolicy:        p.LeadAuthPolicy,
		PaymentTrackingMode:   p.PaymentTrackingMode,
		ProcessorConnection: &eventsv1.ProcessorConnection{
			Status:           p.Processor.Status,
			AccountId:        p.Processor.AccountID,
			ChargesEnabled:   p.Processor.ChargesEnabled,
			PayoutsEnabled:   p.Processor.PayoutsEnabled,
			DetailsSubmitted: p.Processor.DetailsSubmitted,
			ConnectedAt:      tsPtr(p.Processor.ConnectedAt),
		},
		AllowedOrigins: p.AllowedOrigins,
		CreatedAt:      ts(p.CreatedAt),
		UpdatedAt:      ts(p.UpdatedAt),
		Currency:       p.Currency,
		LeadCommission: p.LeadCommission,
	}
	if p.CookieDuration != nil {
		ev.CookieDuration = int32(*p.CookieDuration)
	}
	return ev
}

func (s *Store) CreateProgram(ctx context.Context, p catalog.Program) (catalog.Program, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		p, seq, err = s.insertProgram(ctx, tx, p)
		return err
	})
	return p, seq, err
}

// insertProgram inserts p and its event in tx.
func (s *Store) insertProgram(ctx context.Context, tx pgx.Tx, p catalog.Program) (catalog.Program, catalog.Seq, error) {
	row := tx.QueryRow(ctx, `INSERT INTO programs (advertiser_id, name, domain, commission_type, commission_rate,
			duration_months, cookie_duration, attribution_window_days, hold_days, lead_auth_policy, payment_tracking_mode,
			processor_status, processor_account_id, charges_enabled, payouts_enabled, details_submitted, connected_at, allowed_origins,
			currency, lead_commission, created_at, updated_at)
			VALUES ($1,$2,$3,$4,$5::numeric,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20::numeric,$21,$21)
			RETURNING `+programColumns,
		p.AdvertiserID, p.Name, p.Domain, p.CommissionType, p.CommissionRate, p.DurationMonths, p.CookieDuration,
		p.AttributionWindowDays, p.HoldDays, p.LeadAuthPolicy, p.PaymentTrackingMode, p.Processor.Status,
		p.Processor.AccountID, p.Processor.ChargesEnabled, p.Processor.PayoutsEnabled, p.Processor.DetailsSubmitted,
		p.Processor.ConnectedAt, p.AllowedOrigins, p.Currency, p.LeadCommission, s.now().UTC())
	p, err := scanProgram(row)
	if err != nil {
		return catalog.Program{}, 0, fmt.Errorf("insert program: %w", err)
	}
	seq, err := s.publish(ctx, tx, eventsv1.TypeProgramUpserted, p.ID, programEvent(p))
	return p, seq, err
}

func (s *Store) GetProgram(ctx context.Context, id int64) (catalog.Program, error) {
	p, err := scanProgram(s.pool.QueryRow(ctx, `SELECT `+programColumns+` FROM programs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Program{}, notFound("program", id)
	}
	if err != nil {
		return catalog.Program{}, fmt.Errorf("load program %d: %w", id, err)
	}
	return p, nil
}

func (s *Store) GetPrograms(ctx context.Context, ids []int64) ([]catalog.Program, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+programColumns+` FROM programs WHERE id = ANY ($1) ORDER BY id`, ids)
	if err != nil {
		return nil, fmt.Errorf("load %d programs: %w", len(ids), err)
	}
	defer rows.Close()
	var out []catalog.Program
	for rows.Next() {
		p, err := scanProgram(rows)
		if err != nil {
			return nil, fmt.Errorf("load %d programs: %w", len(ids), err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load %d programs: %w", len(ids), err)
	}
	return out, nil
}

func (s *Store) UpdateProgram(ctx context.Context, id int64, fn func(*catalog.Program) error) (catalog.Program, catalog.Seq, error) {
	var (
		seq catalog.Seq
		p   catalog.Program
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		p, err = scanProgram(tx.QueryRow(ctx, `SELECT `+programColumns+` FROM programs WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("program", id)
		}
		if err != nil {
			return fmt.Errorf("load program %d: %w", id, err)
		}
		if err := fn(&p); err != nil {
			return err
		}
		row := tx.QueryRow(ctx, `UPDATE programs SET name=$2, domain=$3, commission_type=$4, commission_rate=$5::numeric,
			duration_months=$6, cookie_duration=$7, attribution_window_days=$8, hold_days=$9, lead_auth_policy=$10,
			payment_tracking_mode=$11, processor_status=$12, processor_account_id=$13, charges_enabled=$14,
			payouts_enabled=$15, details_submitted=$16, connected_at=$17, allowed_origins=$18, currency=$19,
			lead_commission=$20::numeric, updated_at=now()
			WHERE id=$1 RETURNING `+programColumns,
			id, p.Name, p.Domain, p.CommissionType, p.CommissionRate, p.DurationMonths, p.CookieDuration,
			p.AttributionWindowDays, p.HoldDays, p.LeadAuthPolicy, p.PaymentTrackingMode, p.Processor.Status,
			p.Processor.AccountID, p.Processor.ChargesEnabled, p.Processor.PayoutsEnabled, p.Processor.DetailsSubmitted,
			p.Processor.ConnectedAt, p.AllowedOrigins, p.Currency, p.LeadCommission)
		if p, err = scanProgram(row); err != nil {
			return fmt.Errorf("update program %d: %w", id, err)
		}
		seq, err = s.publish(ctx, tx, eventsv1.TypeProgramUpserted, p.ID, programEvent(p))
		return err
	})
	return p, seq, err
}

func (s *Store) UpsertMembership(ctx context.Context, m catalog.Membership) (catalog.Membership, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		seq, err = s.upsertMembership(ctx, tx, m)
		return err
	})
	return m, seq, err
}

// upsertMembership writes m and its event in tx.
func (s *Store) upsertMembership(ctx context.Context, tx pgx.Tx, m catalog.Membership) (catalog.Seq, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO memberships (program_id, user_id, active, permissions) VALUES ($1,$2,$3,$4)
			ON CONFLICT (program_id, user_id) DO UPDATE SET active = EXCLUDED.active, permissions = EXCLUDED.permissions, updated_at = now()`,
		m.ProgramID, m.UserID, m.Active, m.Permissions); err != nil {
		return 0, fmt.Errorf("upsert membership: %w", err)
	}
	return s.publish(ctx, tx, eventsv1.TypeMembershipUpserted, m.ProgramID, &eventsv1.Membership{
		ProgramId: m.ProgramID, UserId: m.UserID, Active: m.Active, Permissions: m.Permissions,
	})
}

func keyEvent(k catalog.APIKey) *eventsv1.ApiKey {
	return &eventsv1.ApiKey{
		Id: k.ID, ProgramId: k.ProgramID, KeyHash: k.Hash, Prefix: k.Prefix, Test: k.Test,
		RotationMarkedAt: tsPtr(k.RotationMarkedAt), RotationDeadline: tsPtr(k.RotationDeadline), CreatedAt: ts(k.CreatedAt),
		Revoked: k.RevokedAt != nil,
	}
}

// CreateAPIKey stores a key and its event. A hash already stored (an
// imported key sent twice) inserts nothing and answers which key has it: ON
// CONFLICT rather than a caught unique violation, so the lookup runs in the
// same transaction, which then publishes nothing. A concurrent insert of the
// same hash makes this one wait for it and then see its row.
func (s *Store) CreateAPIKey(ctx context.Context, k catalog.APIKey) (catalog.APIKey, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO api_keys (program_id, key_hash, prefix, last4, test) VALUES ($1,$2,$3,NULLIF($4,''),$5)
			ON CONFLICT (key_hash) DO NOTHING RETURNING id, created_at`,
			k.ProgramID, k.Hash, k.Prefix, k.Last4, k.Test).Scan(&k.ID, &k.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			exists := &catalog.KeyExistsError{}
			if err := tx.QueryRow(ctx, `SELECT id, program_id FROM api_keys WHERE key_hash = $1`, k.Hash).
				Scan(&exists.KeyID, &exists.ProgramID); err != nil {
				return fmt.Errorf("load api key with the same hash: %w", err)
			}
			return exists
		}
		if err != nil {
			return fmt.Errorf("insert api key: %w", err)
		}
		seq, err = s.publish(ctx, tx, eventsv1.TypeAPIKeyUpserted, k.ProgramID, keyEvent(k))
		return err
	})
	return k, seq, err
}

func (s *Store) UpdateAPIKey(ctx context.Context, id int64, fn func(*catalog.APIKey) error) (catalog.APIKey, catalog.Seq, error) {
	var (
		seq catalog.Seq
		k   catalog.APIKey
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		k, err = scanAPIKey(tx.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("api key", id)
		}
		if err != nil {
			return fmt.Errorf("load api key %d: %w", id, err)
		}
		if err := fn(&k); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET rotation_marked_at = $2, rotation_deadline = $3, revoked_at = $4 WHERE id = $1`,
			id, k.RotationMarkedAt, k.RotationDeadline, k.RevokedAt); err != nil {
			return fmt.Errorf("update api key %d: %w", id, err)
		}
		seq, err = s.publish(ctx, tx, eventsv1.TypeAPIKeyUpserted, k.ProgramID, keyEvent(k))
		return err
	})
	return k, seq, err
}

func (s *Store) CreatePartner(ctx context.Context, p catalog.Partner) (catalog.Partner, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO partners (name, email) VALUES ($1,$2) RETURNING id, created_at`,
			p.Name, p.Email).Scan(&p.ID, &p.CreatedAt); err != nil {
			return fmt.Errorf("insert partner: %w", err)
		}
		var err error
		seq, err = s.publish(ctx, tx, eventsv1.TypePartnerUpserted, 0, &eventsv1.Partner{Id: p.ID, Name: p.Name, Email: p.Email, CreatedAt: ts(p.CreatedAt)})
		return err
	})
	return p, seq, err
}

func (s *Store) CreatePartnerProgram(ctx context.Context, pp catalog.PartnerProgram) (catalog.PartnerProgram, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO partner_programs (partner_id, program_id, approved, created_at) VALUES ($1,$2,$3,$4) RETURNING id, created_at`,
			pp.PartnerID, pp.ProgramID, pp.Approved, s.now().UTC()).Scan(&pp.ID, &pp.CreatedAt); err != nil {
			return fmt.Errorf("insert partner-program: %w", err)
		}
		var err error
		seq, err = s.publish(ctx, tx, eventsv1.TypePartnerProgramUpserted, pp.ProgramID, &eventsv1.PartnerProgram{
			Id: pp.ID, PartnerId: pp.PartnerID, ProgramId: pp.ProgramID, Approved: pp.Approved, CreatedAt: ts(pp.CreatedAt),
		})
		return err
	})
	return pp, seq, err
}

func linkEvent(l catalog.Link) *eventsv1.Link {
	return &eventsv1.Link{Id: l.ID, ProgramId: l.ProgramID, PartnerId: l.PartnerID, Code: l.Code, Active: l.Active, CreatedAt: ts(l.CreatedAt)}
}

func (s *Store) CreateLink(ctx context.Context, l catalog.Link) (catalog.Link, catalog.Seq, error) {
	var seq catalog.Seq
	// The operator's admin API may give two programs one code (not on the
	// public ingress; tracking resolves a shared code by program_id, else
	// the active link, then the oldest). A brand's console may not
	// (insertLink's claimCode).
	err := s.write(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO links (program_id, partner_id, code, active) VALUES ($1,$2,$3,$4) RETURNING id, created_at`,
			l.ProgramID, l.PartnerID, l.Code, l.Active).Scan(&l.ID, &l.CreatedAt); err != nil {
			return fmt.Errorf("insert link: %w", err)
		}
		var err error
		seq, err = s.publish(ctx, tx, eventsv1.TypeLinkUpserted, l.ProgramID, linkEvent(l))
		return err
	})
	return l, seq, err
}

func (s *Store) UpdateLink(ctx context.Context, id int64, fn func(*catalog.Link) error) (catalog.Link, catalog.Seq, error) {
	var (
		seq catalog.Seq
		l   catalog.Link
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT id, program_id, partner_id, code, active, created_at FROM links WHERE id = $1 FOR UPDATE`, id).
			Scan(&l.ID, &l.ProgramID, &l.PartnerID, &l.Code, &l.Active, &l.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("link", id)
		}
		if err != nil {
			return fmt.Errorf("load link %d: %w", id, err)
		}
		if err := fn(&l); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE links SET active = $2 WHERE id = $1`, id, l.Active); err != nil {
			return fmt.Errorf("update link %d: %w", id, err)
		}
		seq, err = s.publish(ctx, tx, eventsv1.TypeLinkUpserted, l.ProgramID, linkEvent(l))
		return err
	})
	return l, seq, err
}

// FindUserByEmail matches email against lower(email), the unique index.
func (s *Store) FindUserByEmail(ctx context.Context, email string) (catalog.User, error) {
	var u catalog.User
	var adv *int64
	err := s.pool.QueryRow(ctx, `SELECT id, email, name, advertiser_id, blocked, created_at FROM users WHERE lower(email) = lower($1)`, email).
		Scan(&u.ID, &u.Email, &u.Name, &adv, &u.Blocked, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.User{}, &catalog.NotFoundError{What: "user with email " + email}
	}
	if err != nil {
		return catalog.User{}, fmt.Errorf("find user by email: %w", err)
	}
	if adv != nil {
		u.AdvertiserID = *adv
	}
	return u, nil
}

// exists answers whether table has a row with id; table is one of the
// constant names below, never input.
func (s *Store) exists(ctx context.Context, table string, id int64) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("check %s %d: %w", table, id, err)
	}
	return ok, nil
}

// list runs a query and scans each row with scan, answering an empty (not
// nil) slice when there are none.
func list[T any](ctx context.Context, s *Store, what string, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

// ListPrograms checks the advertiser first, so an unknown one is a 404
// rather than an empty list. The two reads need no transaction: advertisers
// are never deleted.
func (s *Store) ListPrograms(ctx context.Context, advertiserID int64) ([]catalog.Program, error) {
	ok, err := s.exists(ctx, "advertisers", advertiserID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound("advertiser", advertiserID)
	}
	return list(ctx, s, "programs", scanProgram,
		`SELECT `+programColumns+` FROM programs WHERE advertiser_id = $1 ORDER BY id`, advertiserID)
}

// FindPartnersByEmail: partner emails are not unique, and have no index on
// lower(email); this is an admin-rate read.
func (s *Store) FindPartnersByEmail(ctx context.Context, email string) ([]catalog.Partner, error) {
	return list(ctx, s, "partners", func(row pgx.Row) (catalog.Partner, error) {
		var p catalog.Partner
		err := row.Scan(&p.ID, &p.Name, &p.Email, &p.CreatedAt)
		return p, err
	}, `SELECT id, name, email, created_at FROM partners WHERE lower(email) = lower($1) ORDER BY id`, email)
}

func scanLink(row pgx.Row) (catalog.Link, error) {
	var l catalog.Link
	err := row.Scan(&l.ID, &l.ProgramID, &l.PartnerID, &l.Code, &l.Active, &l.CreatedAt)
	return l, err
}

// ListLinks answers the program's links, or the one with code (codes are
// unique within a program, compared exactly as the unique constraint does).
func (s *Store) ListLinks(ctx context.Context, programID int64, code *string) ([]catalog.Link, error) {
	ok, err := s.exists(ctx, "programs", programID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound("program", programID)
	}
	return list(ctx, s, "links", scanLink, `SELECT id, program_id, partner_id, code, active, created_at FROM links
		WHERE program_id = $1 AND ($2::text IS NULL OR code = $2) ORDER BY id`, programID, code)
}

// keyColumns are the columns scanAPIKey reads, in its order.
const keyColumns = `id, program_id, key_hash, prefix, coalesce(last4, ''), test, rotation_marked_at, rotation_deadline,
	revoked_at, last_used_at, created_at`

func scanAPIKey(row pgx.Row) (catalog.APIKey, error) {
	var k catalog.APIKey
	err := row.Scan(&k.ID, &k.ProgramID, &k.Hash, &k.Prefix, &k.Last4, &k.Test, &k.RotationMarkedAt, &k.RotationDeadline,
		&k.RevokedAt, &k.LastUsedAt, &k.CreatedAt)
	return k, err
}

func (s *Store) ListAPIKeys(ctx context.Context, programID int64) ([]catalog.APIKey, error) {
	ok, err := s.exists(ctx, "programs", programID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound("program", programID)
	}
	return list(ctx, s, "api keys", scanAPIKey, `SELECT `+keyColumns+` FROM api_keys WHERE program_id = $1 ORDER BY id`, programID)
}

// AppliedSeqs reads the consumers' acknowledged progress.
func (s *Store) AppliedSeqs(ctx context.Context) (map[string]catalog.Seq, error) {
	rows, err := s.pool.Query(ctx, `SELECT service, seq FROM catalog_acks`)
	if err != nil {
		return nil, fmt.Errorf("read catalog acks: %w", err)
	}
	out := map[string]catalog.Seq{}
	for rows.Next() {
		var svc string
		var seq int64
		if err := rows.Scan(&svc, &seq); err != nil {
			return nil, fmt.Errorf("scan catalog ack: %w", err)
		}
		out[svc] = catalog.Seq(seq)
	}
	return out, rows.Err()
}

// RecordAck stores a consumer's acknowledgement inside the inbox transaction
// that applies it; progress only ever moves forward. An acknowledgement of
// another epoch (events an earlier database left in the broker) counts for
// nothing: it reports whether the ack was of this database's epoch.
func RecordAck(ctx context.Context, tx pgx.Tx, service, epoch string, seq int64) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO catalog_acks (service, seq)
		SELECT $1, $2 FROM catalog_seq WHERE epoch = $3
		ON CONFLICT (service) DO UPDATE SET seq = GREATEST(catalog_acks.seq, EXCLUDED.seq), updated_at = now()`, service, seq, epoch)
	if err != nil {
		return false, fmt.Errorf("record catalog ack %s@%d: %w", service, seq, err)
	}
	return tag.RowsAffected() > 0, nil
}

// UpdateUser loads the user for update, applies fn and saves what a user
// update may change (name, blocked), with the user's event.
func (s *Store) UpdateUser(ctx context.Context, id int64, fn func(*catalog.User) error) (catalog.User, catalog.Seq, error) {
	var (
		seq catalog.Seq
		u   catalog.User
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		var adv *int64
		err := tx.QueryRow(ctx, `SELECT id, email, name, advertiser_id, blocked, created_at FROM users WHERE id = $1 FOR UPDATE`, id).
			Scan(&u.ID, &u.Email, &u.Name, &adv, &u.Blocked, &u.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("user", id)
		}
		if err != nil {
			return fmt.Errorf("load user %d: %w", id, err)
		}
		if adv != nil {
			u.AdvertiserID = *adv
		}
		if err := fn(&u); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET name = $2, blocked = $3 WHERE id = $1`, id, u.Name, u.Blocked); err != nil {
			return fmt.Errorf("update user %d: %w", id, err)
		}
		seq, err = s.publish(ctx, tx, eventsv1.TypeUserUpserted, 0, userEvent(u))
		return err
	})
	return u, seq, err
}

// revocationSweepBatch bounds the expired revocations one sign-out deletes.
const revocationSweepBatch = 500

// revocationKeep is how long past its token's expiry a revocation is kept:
// more than the verifiers' leeway for clock skew (5 s), so no service can
// still accept the token when its revocation goes.
const revocationKeep = time.Minute

// RevokeSession stores the revocation and its event in one transaction,
// once per session: a second sign-out of the same token publishes nothing.
func (s *Store) RevokeSession(ctx context.Context, r catalog.SessionRevocation) (catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM session_revocations WHERE session_id IN (
				SELECT session_id FROM session_revocations WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)`,
			r.RevokedAt.Add(-revocationKeep), revocationSweepBatch); err != nil {
			return fmt.Errorf("sweep expired revocations: %w", err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO session_revocations (session_id, user_id, expires_at, revoked_at)
			VALUES ($1, $2, $3, $4) ON CONFLICT (session_id) DO NOTHING`, r.SessionID, r.UserID, r.ExpiresAt, r.RevokedAt)
		if err != nil {
			return fmt.Errorf("insert revocation: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		seq, err = s.publish(ctx, tx, eventsv1.TypeSessionRevoked, 0, &eventsv1.SessionRevoked{
			SessionId: r.SessionID, UserId: r.UserID, ExpiresAt: ts(r.ExpiresAt), RevokedAt: ts(r.RevokedAt),
		})
		return err
	})
	return seq, err
}

// SessionRevoked is one primary-key lookup.
func (s *Store) SessionRevoked(ctx context.Context, id string) (bool, error) {
	var revoked bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM session_revocations WHERE session_id = $1)`, id).Scan(&revoked); err != nil {
		return false, fmt.Errorf("look up revocation of session %s: %w", id, err)
	}
	return revoked, nil
}
