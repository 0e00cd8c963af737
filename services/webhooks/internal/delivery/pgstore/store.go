// Package pgstore keeps webhook deliveries in Postgres for the dispatcher
// (delivery.Store). Every time it writes comes from the caller's clock,
// never the server's now(), so an injected clock rules leases, backoff and
// disabling.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/svc-dev/svc/libs/pg"

	"github.com/svc-dev/svc/services/webhooks/internal/delivery"
)

// Store is the delivery.Store over a pool whose search_path is the
// webhooks schema.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

var _ delivery.Store = (*Store)(nil)

// ClaimSQL reads due deliveries soonest first (deliveries_due, which
// leaves out the parked deliveries of disabled endpoints), skipping
// endpoints whose share of this pod's workers is taken ($3), disabled
// endpoints and deliveries behind an earlier pending one of the same object
// (deliveries_object_pending), and locks them; rows another pod holds are
// skipped. It reads a few more than the limit, since the per-endpoint share
// may leave some out.
const ClaimSQL = `
SELECT d.id, d.endpoint_id, d.attempts, d.created_at
FROM deliveries d
JOIN endpoints e ON e.id = d.endpoint_id
WHERE d.status = 'pending' AND NOT d.parked
  AND d.next_attempt_at <= $1
  AND e.enabled
  AND d.endpoint_id <> ALL($3::bigint[])
  AND NOT EXISTS (
    SELECT 1 FROM deliveries p
    WHERE p.endpoint_id = d.endpoint_id AND p.object_key = d.object_key
      AND p.status = 'pending' AND p.id < d.id)
ORDER BY d.next_attempt_at, d.id
LIMIT $2
FOR UPDATE OF d SKIP LOCKED`

// Claim implements delivery.Store.
func (s *Store) Claim(ctx context.Context, req delivery.ClaimRequest) ([]delivery.Claimed, error) {
	if req.Limit <= 0 {
		return nil, nil
	}
	full := []int64{}
	for id, n := range req.Free {
		if n <= 0 {
			full = append(full, id)
		}
	}
	var out []delivery.Claimed
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, ClaimSQL, req.Now, req.Limit*2, full)
		if err != nil {
			return fmt.Errorf("claim deliveries: %w", err)
		}
		taken := map[int64]int{}
		var ids []int64
		for rows.Next() {
			var c delivery.Claimed
			if err := rows.Scan(&c.ID, &c.EndpointID, &c.Attempt, &c.CreatedAt); err != nil {
				rows.Close()
				return fmt.Errorf("claim deliveries: %w", err)
			}
			free, ok := req.Free[c.EndpointID]
			if !ok {
				free = req.PerEndpoint
			}
			if len(out) == req.Limit || taken[c.EndpointID] >= free {
				continue
			}
			taken[c.EndpointID]++
			c.Attempt++
			out = append(out, c)
			ids = append(ids, c.ID)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claim deliveries: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE deliveries SET attempts = attempts + 1, last_attempt_at = $2, next_attempt_at = $3
			WHERE id = ANY($1::bigint[])`, ids, req.Now, req.LeaseUntil); err != nil {
			return fmt.Errorf("lease deliveries: %w", err)
		}
		// What the attempts need: the event and the endpoint's url and
		// unexpired secrets, newest first.
		rows, err = tx.Query(ctx, `
			SELECT d.id, e.program_id, e.url, ev.id, ev.type, ev.created_at, ev.body,
			  ARRAY(SELECT s.secret_sealed FROM endpoint_secrets s
			        WHERE s.endpoint_id = d.endpoint_id AND (s.expires_at IS NULL OR s.expires_at > $2)
			        ORDER BY s.id DESC)
			FROM deliveries d
			JOIN endpoints e ON e.id = d.endpoint_id
			JOIN events ev ON ev.id = d.event_id
			WHERE d.id = ANY($1::bigint[])`, ids, req.Now)
		if err != nil {
			return fmt.Errorf("read claimed deliveries: %w", err)
		}
		defer rows.Close()
		byID := make(map[int64]*delivery.Claimed, len(out))
		for i := range out {
			byID[out[i].ID] = &out[i]
		}
		for rows.Next() {
			var id int64
			var c delivery.Claimed
			if err := rows.Scan(&id, &c.ProgramID, &c.URL, &c.EventID, &c.EventType, &c.EventCreatedAt, &c.Body, &c.Secrets); err != nil {
				return fmt.Errorf("read claimed deliveries: %w", err)
			}
			if p := byID[id]; p != nil {
				p.ProgramID, p.URL, p.EventID, p.EventType, p.EventCreatedAt, p.Body, p.Secrets = c.ProgramID, c.URL, c.EventID, c.EventType, c.EventCreatedAt, c.Body, c.Secrets
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Record implements delivery.Store. The delivery is updated only while it
// still carries the attempt's number and is pending: an outcome arriving
// after its lease ended and another attempt began is not written over the
// newer one. The endpoint's failing run is updated all the same: the
// attempt did happen.
func (s *Store) Record(ctx context.Context, o delivery.Outcome) (delivery.Recorded, error) {
	var rec delivery.Recorded
	durationMS := int32(min(o.Duration.Milliseconds(), 1<<31-1))
	var status *int32
	if o.Status != 0 {
		v := int32(o.Status)
		status = &v
	}
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		switch {
		case o.Delivered:
			if _, err := tx.Exec(ctx, `UPDATE deliveries SET status = 'delivered', delivered_at = $3, next_attempt_at = NULL,
				last_status = $4, last_error = '', last_duration_ms = $5
				WHERE id = $1 AND attempts = $2 AND status = 'pending'`, o.DeliveryID, o.Attempt, o.Now, status, durationMS); err != nil {
				return fmt.Errorf("record delivery %d delivered: %w", o.DeliveryID, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL`, o.EndpointID); err != nil {
				return fmt.Errorf("record endpoint %d succeeding: %w", o.EndpointID, err)
			}
			return nil
		default:
			var next *time.Time
			st := "pending"
			if o.Failed {
				st = "failed"
			} else {
				next = &o.NextAttemptAt
			}
			if _, err := tx.Exec(ctx, `UPDATE deliveries SET status = $3, next_attempt_at = $4,
				last_status = $5, last_error = $6, last_duration_ms = $7
				WHERE id = $1 AND attempts = $2 AND status = 'pending'`, o.DeliveryID, o.Attempt, st, next, status, o.Error, durationMS); err != nil {
				return fmt.Errorf("record delivery %d attempt: %w", o.DeliveryID, err)
			}
		}
		if !o.EndpointFault {
			return nil
		}
		var since time.Time
		var enabled bool
		var programID int64
		err := tx.QueryRow(ctx, `UPDATE endpoints SET failing_since = COALESCE(failing_since, $2) WHERE id = $1
			RETURNING failing_since, enabled, program_id`, o.EndpointID, o.Now).Scan(&since, &enabled, &programID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("record endpoint %d failing: %w", o.EndpointID, err)
		}
		if !enabled || since.After(o.DisableBefore) {
			return nil
		}
		tag, err := tx.Exec(ctx, `UPDATE endpoints SET enabled = false, disabled_reason = 'failing', disabled_at = $2, updated_at = $2
			WHERE id = $1 AND enabled`, o.EndpointID, o.Now)
		if err != nil {
			return fmt.Errorf("disable endpoint %d: %w", o.EndpointID, err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		if err := ParkDeliveries(ctx, tx, o.EndpointID, true); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO notifications (program_id, endpoint_id, kind, created_at) VALUES ($1, $2, 'endpoint_disabled', $3)`,
			programID, o.EndpointID, o.Now); err != nil {
			return fmt.Errorf("notify endpoint %d disabled: %w", o.EndpointID, err)
		}
		rec.Disabled = true
		return nil
	})
	if err != nil {
		return delivery.Recorded{}, err
	}
	return rec, nil
}

// ParkDeliveries parks (or unparks) the endpoint's pending deliveries, in
// the transaction that disables (or enables) it (deliveries_object_pending
// serves the endpoint). A delivery recorded or written in the moment the
// endpoint changed can stay unparked while it is disabled: the claim's
// join on endpoints.enabled still skips it, and there are at most as many
// as attempts were in flight.
func ParkDeliveries(ctx context.Context, tx pgx.Tx, endpointID int64, park bool) error {
	if _, err := tx.Exec(ctx, `UPDATE deliveries SET parked = $2 WHERE endpoint_id = $1 AND status = 'pending' AND parked <> $2`,
		endpointID, park); err != nil {
		return fmt.Errorf("park deliveries of endpoint %d: %w", endpointID, err)
	}
	return nil
}

// PendingSQL reads the queue depth from the pending deliveries alone (a
// partial index, deliveries_object_pending or deliveries_due), grouped by
// endpoint, counting only enabled endpoints: a disabled endpoint's backlog
// waits for the brand, it is not a queue the dispatcher is behind on. The
// endpoint is looked up by its key once per group, in a scalar subquery
// Postgres cannot turn into a join: written as a join (IN or EXISTS), it
// was planned as a merge join reading every endpoint in endpoints_pkey
// order, every GaugeInterval, however few had a backlog
// (deploy/devstack/plans).
const PendingSQL = `
SELECT COALESCE(sum(q.n), 0)::bigint, COALESCE(max(q.n), 0)::bigint FROM (
  SELECT endpoint_id, count(*) AS n FROM deliveries
  WHERE status = 'pending'
  GROUP BY endpoint_id) q
WHERE (SELECT e.enabled FROM endpoints e WHERE e.id = q.endpoint_id)`

// Pending implements delivery.Store.
func (s *Store) Pending(ctx context.Context) (delivery.Pending, error) {
	var p delivery.Pending
	if err := s.pool.QueryRow(ctx, PendingSQL).Scan(&p.Total, &p.MaxEndpoint); err != nil {
		return delivery.Pending{}, fmt.Errorf("read pending deliveries: %w", err)
	}
	return p, nil
}
