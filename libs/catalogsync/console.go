package catalogsync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// ConsoleEvent reports whether ApplyConsole keeps something of env's type.
func ConsoleEvent(env *eventsv1.Envelope) bool {
	switch env.GetType() {
	case eventsv1.TypeMembershipUpserted, eventsv1.TypePartnerProgramUpserted, eventsv1.TypeUserUpserted, eventsv1.TypeSessionRevoked:
		return true
	}
	return false
}

// ApplyConsole applies the catalog events a service's console routes check
// (membership, partner-program, user and session-revoked events; others are
// ignored) inside tx: a member's permissions, a user's suspension, a
// signed-out session, and which partners are in which program. The service
// keeps, in its own schema, the tables of commissions' migration
// 00009_console.sql (memberships, users, session_revocations,
// partner_programs). An older snapshot never overwrites a newer one
// (catalog_seq).
func ApplyConsole(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	seq := env.GetSeq()
	switch env.GetType() {
	case eventsv1.TypeMembershipUpserted:
		var m eventsv1.Membership
		if err := proto.Unmarshal(env.GetPayload(), &m); err != nil {
			return fmt.Errorf("decode membership event %s: %w", env.GetId(), err)
		}
		perms := m.GetPermissions()
		if perms == nil {
			perms = []string{}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO memberships (program_id, user_id, active, permissions, catalog_seq)
			VALUES ($1,$2,$3,$4,$5)
			ON CONFLICT (program_id, user_id) DO UPDATE SET active = EXCLUDED.active, permissions = EXCLUDED.permissions,
				catalog_seq = EXCLUDED.catalog_seq
			WHERE memberships.catalog_seq < EXCLUDED.catalog_seq`,
			m.GetProgramId(), m.GetUserId(), m.GetActive(), perms, seq); err != nil {
			return fmt.Errorf("upsert membership %d/%d: %w", m.GetProgramId(), m.GetUserId(), err)
		}
	case eventsv1.TypePartnerProgramUpserted:
		var pp eventsv1.PartnerProgram
		if err := proto.Unmarshal(env.GetPayload(), &pp); err != nil {
			return fmt.Errorf("decode partner-program event %s: %w", env.GetId(), err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO partner_programs (id, program_id, partner_id, approved, catalog_seq)
			VALUES ($1,$2,$3,$4,$5)
			ON CONFLICT (id) DO UPDATE SET program_id = EXCLUDED.program_id, partner_id = EXCLUDED.partner_id,
				approved = EXCLUDED.approved, catalog_seq = EXCLUDED.catalog_seq
			WHERE partner_programs.catalog_seq < EXCLUDED.catalog_seq`,
			pp.GetId(), pp.GetProgramId(), pp.GetPartnerId(), pp.GetApproved(), seq); err != nil {
			return fmt.Errorf("upsert partner program %d: %w", pp.GetId(), err)
		}
	case eventsv1.TypeUserUpserted:
		var u eventsv1.User
		if err := proto.Unmarshal(env.GetPayload(), &u); err != nil {
			return fmt.Errorf("decode user event %s: %w", env.GetId(), err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO users (id, blocked, catalog_seq) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET blocked = EXCLUDED.blocked, catalog_seq = EXCLUDED.catalog_seq
			WHERE users.catalog_seq < EXCLUDED.catalog_seq`, u.GetId(), u.GetBlocked(), seq); err != nil {
			return fmt.Errorf("upsert user %d: %w", u.GetId(), err)
		}
	case eventsv1.TypeSessionRevoked:
		return revokeSession(ctx, tx, env)
	}
	return nil
}

// revocationKeep is how long past its token's expiry a revocation is kept:
// more than the verifier's leeway for clock skew (5 s); judged at the
// event's own time, so a replay leaves the same rows.
const revocationKeep = time.Minute

// revocationSweepBatch bounds the expired revocations one event deletes.
const revocationSweepBatch = 500

// revokeSession keeps a signed-out session until its token expires and
// sweeps the revocations of tokens that expired before it.
func revokeSession(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	var r eventsv1.SessionRevoked
	if err := proto.Unmarshal(env.GetPayload(), &r); err != nil {
		return fmt.Errorf("decode session revocation %s: %w", env.GetId(), err)
	}
	if r.GetSessionId() == "" || r.GetExpiresAt() == nil {
		return fmt.Errorf("session revocation %s: no session id or expiry", env.GetId())
	}
	at := r.GetRevokedAt().AsTime()
	if r.GetRevokedAt() == nil {
		at = env.GetOccurredAt().AsTime()
	}
	if _, err := tx.Exec(ctx, `DELETE FROM session_revocations WHERE session_id IN (
			SELECT session_id FROM session_revocations WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)`,
		at.Add(-revocationKeep), revocationSweepBatch); err != nil {
		return fmt.Errorf("sweep expired revocations: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO session_revocations (session_id, user_id, expires_at, catalog_seq)
		VALUES ($1, $2, $3, $4) ON CONFLICT (session_id) DO NOTHING`,
		r.GetSessionId(), r.GetUserId(), r.GetExpiresAt().AsTime(), env.GetSeq()); err != nil {
		return fmt.Errorf("insert revocation of session %s: %w", r.GetSessionId(), err)
	}
	return nil
}

// SessionRevoked is session.Revocations' question over the console tables:
// whether session sessionID of userID was signed out or its user is
// suspended. One round trip, two primary-key lookups.
func SessionRevoked(ctx context.Context, q Queryer, sessionID string, userID int64) (bool, error) {
	var revoked bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM session_revocations WHERE session_id = $1)
		OR EXISTS (SELECT 1 FROM users WHERE id = $2 AND blocked)`, sessionID, userID).Scan(&revoked)
	if err != nil {
		return false, fmt.Errorf("look up session %s of user %d: %w", sessionID, userID, err)
	}
	return revoked, nil
}

// UserSuspended reports whether the console tables have userID suspended
// (users' primary key): for a credential whose own check is cached
// elsewhere (webhooks' verdicts on accounts' opaque CLI tokens), so a
// suspension takes effect at the replica's pace, not the cache's.
func UserSuspended(ctx context.Context, q Queryer, userID int64) (bool, error) {
	var blocked bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1 AND blocked)`, userID).Scan(&blocked)
	if err != nil {
		return false, fmt.Errorf("look up user %d: %w", userID, err)
	}
	return blocked, nil
}

// Queryer is what the console reads need: a pool, a connection or a tx.
type Queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ConsoleMember reads userID's membership of programID from the console
// tables (memberships' primary key): found false when there is none.
func ConsoleMember(ctx context.Context, q Queryer, programID, userID int64) (active bool, permissions []string, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT active, permissions FROM memberships WHERE program_id = $1 AND user_id = $2`,
		programID, userID).Scan(&active, &permissions)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil, false, nil
	}
	if err != nil {
		return false, nil, false, fmt.Errorf("membership %d/%d: %w", programID, userID, err)
	}
	return active, permissions, true, nil
}

// ProgramKnown reports whether the replica's programs table has the
// program.
func ProgramKnown(ctx context.Context, q Queryer, programID int64) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM programs WHERE id = $1)`, programID).Scan(&ok); err != nil {
		return false, fmt.Errorf("program %d: %w", programID, err)
	}
	return ok, nil
}
