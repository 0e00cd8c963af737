package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

var _ catalog.PartnerConsoleStore = (*Store)(nil)

func partnerProgramEvent(pp catalog.PartnerProgram) *eventsv1.PartnerProgram {
	return &eventsv1.PartnerProgram{Id: pp.ID, PartnerId: pp.PartnerID, ProgramId: pp.ProgramID, Approved: pp.Approved, CreatedAt: ts(pp.CreatedAt)}
}

// insertLink inserts l with its event; a code the program already uses is
// catalog.ErrLinkCodeTaken, one another program uses catalog.ErrLinkCodeInUse
// (the caller's transaction then rolls back).
func (s *Store) insertLink(ctx context.Context, tx pgx.Tx, l catalog.Link) (catalog.Link, catalog.Seq, error) {
	if err := claimCode(ctx, tx, l.ProgramID, l.Code); err != nil {
		return catalog.Link{}, 0, err
	}
	err := tx.QueryRow(ctx, `INSERT INTO links (program_id, partner_id, code, active) VALUES ($1,$2,$3,$4)
		ON CONFLICT ON CONSTRAINT links_program_code_key DO NOTHING RETURNING id, created_at`,
		l.ProgramID, l.PartnerID, l.Code, l.Active).Scan(&l.ID, &l.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Link{}, 0, catalog.ErrLinkCodeTaken
	}
	if err != nil {
		return catalog.Link{}, 0, fmt.Errorf("insert link: %w", err)
	}
	seq, err := s.publish(ctx, tx, eventsv1.TypeLinkUpserted, l.ProgramID, linkEvent(l))
	return l, seq, err
}

// claimCode refuses a code another program's link has
// (catalog.ErrLinkCodeInUse): a code is one program's, since tracking
// resolves a click sent without program_id by the code alone, and a
// second program's link with the code would take the first's clicks. The
// advisory lock orders concurrent claims of one code; the check runs after
// it, in a statement whose snapshot sees any claim committed before.
func claimCode(ctx context.Context, tx pgx.Tx, programID int64, code string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('link code ' || $1, 0))`, code); err != nil {
		return fmt.Errorf("lock link code: %w", err)
	}
	var elsewhere bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM links WHERE code = $1 AND program_id <> $2)`, code, programID).Scan(&elsewhere); err != nil {
		return fmt.Errorf("look up link code: %w", err)
	}
	if elsewhere {
		return catalog.ErrLinkCodeInUse
	}
	return nil
}

// approval locks and reads the partner's record in the program: a
// *NotFoundError when the partner is not in it.
func approval(ctx context.Context, tx pgx.Tx, programID, partnerID int64, lock string) (catalog.PartnerProgram, error) {
	var pp catalog.PartnerProgram
	err := tx.QueryRow(ctx, `SELECT id, partner_id, program_id, approved, created_at FROM partner_programs
		WHERE program_id = $1 AND partner_id = $2 `+lock, programID, partnerID).
		Scan(&pp.ID, &pp.PartnerID, &pp.ProgramID, &pp.Approved, &pp.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return pp, &catalog.NotFoundError{What: "partner"}
	}
	if err != nil {
		return pp, fmt.Errorf("load partner %d of program %d: %w", partnerID, programID, err)
	}
	return pp, nil
}

// InvitePartner writes the partner (when new), its approved record and its
// first link, each with its event, in one transaction.
func (s *Store) InvitePartner(ctx context.Context, p catalog.Partner, l catalog.Link) (catalog.Partner, catalog.PartnerProgram, catalog.Link, catalog.Seq, error) {
	var (
		pp  catalog.PartnerProgram
		seq catalog.Seq
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		if p.ID == 0 {
			if err := tx.QueryRow(ctx, `INSERT INTO partners (name, email) VALUES ($1,$2) RETURNING id, created_at`,
				p.Name, p.Email).Scan(&p.ID, &p.CreatedAt); err != nil {
				return fmt.Errorf("insert partner: %w", err)
			}
			if _, err := s.publish(ctx, tx, eventsv1.TypePartnerUpserted, 0,
				&eventsv1.Partner{Id: p.ID, Name: p.Name, Email: p.Email, CreatedAt: ts(p.CreatedAt)}); err != nil {
				return err
			}
		}
		pp = catalog.PartnerProgram{PartnerID: p.ID, ProgramID: l.ProgramID, Approved: true}
		if err := tx.QueryRow(ctx, `INSERT INTO partner_programs (partner_id, program_id, approved, created_at) VALUES ($1,$2,true,$3)
			RETURNING id, created_at`, pp.PartnerID, pp.ProgramID, s.now().UTC()).Scan(&pp.ID, &pp.CreatedAt); err != nil {
			return fmt.Errorf("insert partner-program: %w", err)
		}
		if _, err := s.publish(ctx, tx, eventsv1.TypePartnerProgramUpserted, pp.ProgramID, partnerProgramEvent(pp)); err != nil {
			return err
		}
		l.PartnerID = p.ID
		var err error
		l, seq, err = s.insertLink(ctx, tx, l)
		return err
	})
	if err != nil {
		return catalog.Partner{}, catalog.PartnerProgram{}, catalog.Link{}, 0, err
	}
	return p, pp, l, seq, nil
}

// SetPartnerApproval updates the record and, on a rejection, turns off the
// partner's active links of the program, all in one transaction.
func (s *Store) SetPartnerApproval(ctx context.Context, programID, partnerID int64, approved bool) (catalog.PartnerProgram, []catalog.Link, catalog.Seq, error) {
	var (
		pp  catalog.PartnerProgram
		off []catalog.Link
		seq catalog.Seq
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		if pp, err = approval(ctx, tx, programID, partnerID, "FOR UPDATE"); err != nil {
			return err
		}
		pp.Approved = approved
		if _, err := tx.Exec(ctx, `UPDATE partner_programs SET approved = $2 WHERE id = $1`, pp.ID, approved); err != nil {
			return fmt.Errorf("update partner-program %d: %w", pp.ID, err)
		}
		if seq, err = s.publish(ctx, tx, eventsv1.TypePartnerProgramUpserted, programID, partnerProgramEvent(pp)); err != nil {
			return err
		}
		if approved {
			return nil
		}
		rows, err := tx.Query(ctx, `UPDATE links SET active = false WHERE program_id = $1 AND partner_id = $2 AND active
			RETURNING id, program_id, partner_id, code, active, created_at`, programID, partnerID)
		if err != nil {
			return fmt.Errorf("turn off partner %d links: %w", partnerID, err)
		}
		off, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalog.Link, error) { return scanLink(row) })
		if err != nil {
			return fmt.Errorf("turn off partner %d links: %w", partnerID, err)
		}
		for _, l := range off {
			if seq, err = s.publish(ctx, tx, eventsv1.TypeLinkUpserted, programID, linkEvent(l)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return catalog.PartnerProgram{}, nil, 0, err
	}
	return pp, off, seq, nil
}

// CreatePartnerLink holds the partner's record (FOR SHARE) while the link
// is written, so a rejection at the same moment cannot leave it active.
func (s *Store) CreatePartnerLink(ctx context.Context, l catalog.Link) (catalog.Link, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		pp, err := approval(ctx, tx, l.ProgramID, l.PartnerID, "FOR SHARE")
		if err != nil {
			return err
		}
		if !pp.Approved {
			return catalog.ErrPartnerNotApproved
		}
		l, seq, err = s.insertLink(ctx, tx, l)
		return err
	})
	if err != nil {
		return catalog.Link{}, 0, err
	}
	return l, seq, nil
}

// SetProgramLinkActive loads the link by id within the program only, so
// another program's link id changes nothing.
func (s *Store) SetProgramLinkActive(ctx context.Context, programID, linkID int64, active bool) (catalog.Link, catalog.Seq, error) {
	var (
		l   catalog.Link
		seq catalog.Seq
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		l, err = scanLink(tx.QueryRow(ctx, `SELECT id, program_id, partner_id, code, active, created_at FROM links
			WHERE id = $1 AND program_id = $2 FOR UPDATE`, linkID, programID))
		if errors.Is(err, pgx.ErrNoRows) {
			return &catalog.NotFoundError{What: "link"}
		}
		if err != nil {
			return fmt.Errorf("load link %d: %w", linkID, err)
		}
		if active {
			pp, err := approval(ctx, tx, programID, l.PartnerID, "FOR SHARE")
			if err != nil || !pp.Approved {
				// A link whose partner left or was rejected stays off.
				return catalog.ErrPartnerNotApproved
			}
		}
		l.Active = active
		if _, err := tx.Exec(ctx, `UPDATE links SET active = $2 WHERE id = $1`, linkID, active); err != nil {
			return fmt.Errorf("update link %d: %w", linkID, err)
		}
		seq, err = s.publish(ctx, tx, eventsv1.TypeLinkUpserted, programID, linkEvent(l))
		return err
	})
	if err != nil {
		return catalog.Link{}, 0, err
	}
	return l, seq, nil
}
