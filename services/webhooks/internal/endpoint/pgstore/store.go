// Package pgstore is the console endpoints' Store over webhooks' schema:
// the replica's programs and memberships, endpoints with their sealed
// secrets, the ping's event, the delivery log and the program's
// notifications. Each statement reads by a key or an index range
// (endpoints_program, endpoint_secrets_endpoint, deliveries_endpoint,
// deliveries_endpoint_status, notifications_program); times come from the
// caller's clock, never the database's.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/pg"
	deliverypg "github.com/svc-dev/svc/services/webhooks/internal/delivery/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint"
)

// Store reads and writes the console's endpoints.
type Store struct {
	pool *pgxpool.Pool
}

// New returns the store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Member reads a membership (memberships' primary key).
func (s *Store) Member(ctx context.Context, programID, userID int64) (endpoint.Member, bool, error) {
	active, perms, found, err := catalogsync.ConsoleMember(ctx, s.pool, programID, userID)
	return endpoint.Member{Active: active, Permissions: perms}, found, err
}

// ProgramExists reports whether the replica knows the program.
func (s *Store) ProgramExists(ctx context.Context, programID int64) (bool, error) {
	return catalogsync.ProgramKnown(ctx, s.pool, programID)
}

// Revoked is session.Revocations over the replica.
func (s *Store) Revoked(ctx context.Context, c session.Claims) (bool, error) {
	return catalogsync.SessionRevoked(ctx, s.pool, c.ID, c.UserID)
}

const columns = `id, program_id, url, description, events, include_test, enabled, disabled_reason, disabled_at, created_at, updated_at`

func scanEndpoint(row pgx.Row) (endpoint.Endpoint, error) {
	var e endpoint.Endpoint
	err := row.Scan(&e.ID, &e.ProgramID, &e.URL, &e.Description, &e.Events, &e.IncludeTest, &e.Enabled, &e.DisabledReason,
		&e.DisabledAt, &e.CreatedAt, &e.UpdatedAt)
	if err != nil {
		return e, err
	}
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	e.DisabledAt = utc(e.DisabledAt)
	return e, nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Create writes the endpoint and its first secret in one transaction. The
// program's endpoints are counted under a transaction-scoped advisory lock
// on the program, so two creates at once cannot both pass the cap.
func (s *Store) Create(ctx context.Context, e endpoint.Endpoint, seal endpoint.Seal, max int) (endpoint.Endpoint, error) {
	var out endpoint.Endpoint
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('webhooks.endpoints.program:' || $1::bigint::text, 0))`, e.ProgramID); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM endpoints WHERE program_id = $1`, e.ProgramID).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return endpoint.ErrTooMany
		}
		var err error
		out, err = scanEndpoint(tx.QueryRow(ctx, `INSERT INTO endpoints (program_id, url, description, events, include_test, enabled, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, true, $6, $6) RETURNING `+columns,
			e.ProgramID, e.URL, e.Description, e.Events, e.IncludeTest, e.CreatedAt))
		if err != nil {
			return err
		}
		sealed, err := seal(out.ID)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO endpoint_secrets (endpoint_id, secret_sealed, created_at) VALUES ($1, $2, $3)`, out.ID, sealed, e.CreatedAt)
		return err
	})
	if err != nil {
		if errors.Is(err, endpoint.ErrTooMany) {
			return endpoint.Endpoint{}, endpoint.ErrTooMany
		}
		return endpoint.Endpoint{}, fmt.Errorf("create endpoint of program %d: %w", e.ProgramID, err)
	}
	return out, nil
}

// List answers the program's endpoints, oldest first (endpoints_program;
// at most endpoint.MaxEndpoints rows).
func (s *Store) List(ctx context.Context, programID int64) ([]endpoint.Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM endpoints WHERE program_id = $1 ORDER BY id`, programID)
	if err != nil {
		return nil, fmt.Errorf("endpoints of program %d: %w", programID, err)
	}
	defer rows.Close()
	out := []endpoint.Endpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("endpoints of program %d: %w", programID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("endpoints of program %d: %w", programID, err)
	}
	return out, nil
}

// Get reads one endpoint of the program.
func (s *Store) Get(ctx context.Context, programID, id int64) (endpoint.Endpoint, bool, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM endpoints WHERE id = $1 AND program_id = $2`, id, programID))
	if errors.Is(err, pgx.ErrNoRows) {
		return endpoint.Endpoint{}, false, nil
	}
	if err != nil {
		return endpoint.Endpoint{}, false, fmt.Errorf("endpoint %d of program %d: %w", id, programID, err)
	}
	return e, true, nil
}

// Update applies the patch in one statement. Turning the endpoint on
// clears disabled_reason, disabled_at and failing_since; turning it off
// records a manual disabling (an endpoint already off keeps its reason).
func (s *Store) Update(ctx context.Context, programID, id int64, p endpoint.Patch, now time.Time) (endpoint.Endpoint, bool, error) {
	var events any
	if p.Events != nil {
		events = p.Events
	}
	var e endpoint.Endpoint
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var was bool
		if err := tx.QueryRow(ctx, `SELECT enabled FROM endpoints WHERE id = $1 AND program_id = $2 FOR UPDATE`, id, programID).Scan(&was); err != nil {
			return err
		}
		var err error
		if e, err = scanEndpoint(tx.QueryRow(ctx, updateSQL,
			id, programID, p.URL, events, p.Description, p.IncludeTest, p.Enabled, now, endpoint.DisabledManually)); err != nil {
			return err
		}
		if e.Enabled == was {
			return nil
		}
		// Off: its backlog leaves the dispatcher's claim; on: it is due.
		return deliverypg.ParkDeliveries(ctx, tx, id, !e.Enabled)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return endpoint.Endpoint{}, false, nil
	}
	if err != nil {
		return endpoint.Endpoint{}, false, fmt.Errorf("update endpoint %d of program %d: %w", id, programID, err)
	}
	return e, true, nil
}

// updateSQL applies a patch ($3..$7, NULL: unchanged) at $8.
const updateSQL = `UPDATE endpoints SET
			url = COALESCE($3, url),
			events = COALESCE($4::text[], events),
			description = COALESCE($5, description),
			include_test = COALESCE($6, include_test),
			enabled = COALESCE($7, enabled),
			disabled_reason = CASE WHEN $7 IS TRUE THEN ''
				WHEN $7 IS FALSE AND enabled THEN $9 ELSE disabled_reason END,
			disabled_at = CASE WHEN $7 IS TRUE THEN NULL
				WHEN $7 IS FALSE AND enabled THEN $8 ELSE disabled_at END,
			failing_since = CASE WHEN $7 IS TRUE AND NOT enabled THEN NULL ELSE failing_since END,
			updated_at = $8
		WHERE id = $1 AND program_id = $2
		RETURNING ` + columns

// Delete deletes the endpoint; its secrets and deliveries go with it (ON
// DELETE CASCADE), its notifications stay (migration 00008).
func (s *Store) Delete(ctx context.Context, programID, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM endpoints WHERE id = $1 AND program_id = $2`, id, programID)
	if err != nil {
		return false, fmt.Errorf("delete endpoint %d of program %d: %w", id, programID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Rotate adds a secret under the endpoint's row lock (two rotations at
// once follow each other): secrets still signing beyond now that were
// already rotated out expire now, the current one at now+overlap, and the
// new one is current.
func (s *Store) Rotate(ctx context.Context, programID, id int64, seal endpoint.Seal, now time.Time, overlap time.Duration) (bool, error) {
	found := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT true FROM endpoints WHERE id = $1 AND program_id = $2 FOR UPDATE`, id, programID).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE endpoint_secrets SET expires_at = $2 WHERE endpoint_id = $1 AND expires_at > $2`, id, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE endpoint_secrets SET expires_at = $2 WHERE endpoint_id = $1 AND expires_at IS NULL`, id, now.Add(overlap)); err != nil {
			return err
		}
		sealed, err := seal(id)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO endpoint_secrets (endpoint_id, secret_sealed, created_at) VALUES ($1, $2, $3)`, id, sealed, now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE endpoints SET updated_at = $2 WHERE id = $1`, id, now)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("rotate the secret of endpoint %d: %w", id, err)
	}
	return found, nil
}

// Ping writes the event and one delivery to the endpoint, pending and due
// at the event's time, in one transaction (the endpoint row locked so a
// delete at the same moment cannot leave a delivery behind it).
func (s *Store) Ping(ctx context.Context, programID, id int64, ev endpoint.Event) (int64, bool, error) {
	var did int64
	found := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT true FROM endpoints WHERE id = $1 AND program_id = $2 FOR SHARE`, id, programID).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO events (id, program_id, type, is_test, object_key, body, created_at)
			VALUES ($1, $2, $3, false, $4, $5, $6)`, ev.ID, ev.ProgramID, ev.Type, ev.ObjectKey, ev.Body, ev.CreatedAt); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO deliveries (endpoint_id, event_id, event_type, object_key, status, next_attempt_at, created_at)
			VALUES ($1, $2, $3, $4, 'pending', $5, $5) RETURNING id`, id, ev.ID, ev.Type, ev.ObjectKey, ev.CreatedAt).Scan(&did)
	})
	if err != nil {
		return 0, false, fmt.Errorf("ping endpoint %d: %w", id, err)
	}
	return did, found, nil
}

const deliveryColumns = `id, event_id, event_type, status, attempts, last_status, last_error, last_duration_ms,
	last_attempt_at, next_attempt_at, delivered_at, created_at`

func scanDelivery(row pgx.Row) (endpoint.Delivery, error) {
	var d endpoint.Delivery
	err := row.Scan(&d.ID, &d.EventID, &d.EventType, &d.Status, &d.Attempts, &d.LastStatus, &d.LastError, &d.LastDurationMS,
		&d.LastAttemptAt, &d.NextAttemptAt, &d.DeliveredAt, &d.CreatedAt)
	d.LastAttemptAt, d.NextAttemptAt, d.DeliveredAt = utc(d.LastAttemptAt), utc(d.NextAttemptAt), utc(d.DeliveredAt)
	d.CreatedAt = d.CreatedAt.UTC()
	return d, err
}

// DeliveriesQuery is a page of an endpoint's delivery log newest first:
// an index range of deliveries_endpoint (endpoint_id, id) read backwards,
// or of deliveries_endpoint_status (endpoint_id, status, id) with a
// status. Exported for a plan check.
func DeliveriesQuery(status string) string {
	where := `endpoint_id = $1 AND id < $2`
	if status != "" {
		where = `endpoint_id = $1 AND status = $4 AND id < $2`
	}
	return `SELECT ` + deliveryColumns + ` FROM deliveries WHERE ` + where + ` ORDER BY id DESC LIMIT $3`
}

// Deliveries lists a page of the endpoint's deliveries below beforeID.
func (s *Store) Deliveries(ctx context.Context, endpointID int64, status string, beforeID int64, limit int) ([]endpoint.Delivery, error) {
	if beforeID <= 0 {
		beforeID = 1<<63 - 1
	}
	args := []any{endpointID, beforeID, limit}
	if status != "" {
		args = append(args, status)
	}
	rows, err := s.pool.Query(ctx, DeliveriesQuery(status), args...)
	if err != nil {
		return nil, fmt.Errorf("deliveries of endpoint %d: %w", endpointID, err)
	}
	defer rows.Close()
	out := []endpoint.Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("deliveries of endpoint %d: %w", endpointID, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("deliveries of endpoint %d: %w", endpointID, err)
	}
	return out, nil
}

// Retry makes a delivery of the program's endpoint pending and due now
// (parked while the endpoint is disabled, so due once it is enabled);
// its attempts and last attempt's outcome are kept for the log, its
// delivered_at cleared (it is to be delivered again).
func (s *Store) Retry(ctx context.Context, programID, endpointID, deliveryID int64, now time.Time) (endpoint.Delivery, bool, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `UPDATE deliveries d SET status = 'pending', next_attempt_at = $4, delivered_at = NULL,
			parked = NOT e.enabled
		FROM endpoints e
		WHERE d.id = $3 AND d.endpoint_id = $2 AND e.id = d.endpoint_id AND e.program_id = $1
		RETURNING d.id, d.event_id, d.event_type, d.status, d.attempts, d.last_status, d.last_error, d.last_duration_ms,
			d.last_attempt_at, d.next_attempt_at, d.delivered_at, d.created_at`, programID, endpointID, deliveryID, now))
	if errors.Is(err, pgx.ErrNoRows) {
		return endpoint.Delivery{}, false, nil
	}
	if err != nil {
		return endpoint.Delivery{}, false, fmt.Errorf("retry delivery %d: %w", deliveryID, err)
	}
	return d, true, nil
}

// NotificationsQuery is a page of a program's notifications newest first:
// an index range of notifications_program (program_id, id) read
// backwards, each row's endpoint by its primary key. A LEFT JOIN, since a
// notification outlives its endpoint (url null then). Exported for a
// plan check.
const NotificationsQuery = `SELECT n.id, n.kind, n.endpoint_id, e.url, n.created_at
	FROM notifications n LEFT JOIN endpoints e ON e.id = n.endpoint_id AND e.program_id = n.program_id
	WHERE n.program_id = $1 AND n.id < $2
	ORDER BY n.id DESC LIMIT $3`

// Notifications lists a page of the program's notifications below
// beforeID.
func (s *Store) Notifications(ctx context.Context, programID, beforeID int64, limit int) ([]endpoint.Notification, error) {
	if beforeID <= 0 {
		beforeID = 1<<63 - 1
	}
	rows, err := s.pool.Query(ctx, NotificationsQuery, programID, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("notifications of program %d: %w", programID, err)
	}
	defer rows.Close()
	out := []endpoint.Notification{}
	for rows.Next() {
		var n endpoint.Notification
		if err := rows.Scan(&n.ID, &n.Kind, &n.EndpointID, &n.URL, &n.CreatedAt); err != nil {
			return nil, fmt.Errorf("notifications of program %d: %w", programID, err)
		}
		n.CreatedAt = n.CreatedAt.UTC()
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("notifications of program %d: %w", programID, err)
	}
	return out, nil
}
