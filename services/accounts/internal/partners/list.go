package partners

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Page sizes of the partners list.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// The list's query refusals.
var (
	ErrBadLimit  = &catalog.FieldError{Field: "limit", Message: "limit must be a whole number from 1 to " + strconv.Itoa(MaxLimit)}
	ErrBadCursor = &catalog.FieldError{Field: "cursor", Message: "cursor must be the next_cursor of a previous page"}
)

// Page asks for the partners with an id above After, at most Limit.
type Page struct {
	After int64
	Limit int
}

// Enrolled is a partner of the program as the catalog holds it: the
// partner, its record in the program and its links there.
type Enrolled struct {
	Partner    catalog.Partner
	Approved   bool
	EnrolledAt time.Time
	Links      []catalog.Link
}

// Money is one currency's revenue and commission, in its minor units.
type Money struct {
	Currency   string
	Revenue    int64
	Commission int64
}

// Figures are a partner's activity over the figures' window.
type Figures struct {
	Clicks, Leads, Conversions int64
	Money                      []Money
}

// Window is the span the figures cover, [From, To).
type Window struct{ From, To time.Time }

// Listed is a page; Next is the After of the next page, 0 on the last.
// Figures holds each listed partner's, by id, when analytics answered;
// nil when it could not (the list is still answered), and FiguresErr
// then says why, for the log.
type Listed struct {
	Partners   []Enrolled
	Next       int64
	Figures    map[int64]Figures
	Window     Window
	FiguresErr error
}

// Lister reads the program's partners, the svc test fixture partner left
// out (as the CLI's status and the dashboard do).
type Lister interface {
	// ListEnrolled reads at most limit partners of the program with an id
	// above after, by id, each with its links of the program.
	ListEnrolled(ctx context.Context, programID, after int64, limit int) ([]Enrolled, error)
}

// FiguresSource is where the figures come from (analytics' rollups).
type FiguresSource interface {
	PartnerFigures(ctx context.Context, programID int64, partners []int64) (map[int64]Figures, Window, error)
}

// List answers a page of the program's partners with their figures, to a
// member who may read the program. Analytics failing costs the figures,
// not the list.
func (s *service) List(ctx context.Context, userID, programID int64, p Page) (Listed, error) {
	if err := s.cfg.Access.Authorize(ctx, userID, programID, identity.PermissionRead); err != nil {
		return Listed{}, err
	}
	if p.Limit < 1 || p.Limit > MaxLimit {
		return Listed{}, ErrBadLimit
	}
	if p.After < 0 {
		return Listed{}, ErrBadCursor
	}
	if s.cfg.Lister == nil {
		return Listed{}, fmt.Errorf("list partners of program %d: no store", programID)
	}
	got, err := s.cfg.Lister.ListEnrolled(ctx, programID, p.After, p.Limit+1)
	if err != nil {
		return Listed{}, fmt.Errorf("list partners of program %d: %w", programID, err)
	}
	out := Listed{Partners: got}
	if len(got) > p.Limit {
		out.Partners = got[:p.Limit]
		out.Next = out.Partners[p.Limit-1].Partner.ID
	}
	if len(out.Partners) == 0 {
		out.Figures = map[int64]Figures{}
		return out, nil
	}
	if s.cfg.Figures == nil {
		out.FiguresErr = errNoFigures
		return out, nil
	}
	ids := make([]int64, len(out.Partners))
	for i, e := range out.Partners {
		ids[i] = e.Partner.ID
	}
	figures, w, ferr := s.cfg.Figures.PartnerFigures(ctx, programID, ids)
	if ferr != nil {
		out.FiguresErr = fmt.Errorf("figures of program %d's partners: %w", programID, ferr)
		return out, nil
	}
	out.Figures, out.Window = figures, w
	return out, nil
}

// errNoFigures: accounts was started without analytics' address.
var errNoFigures = fmt.Errorf("no figures source (ANALYTICS_URL and INTERNAL_TOKEN unset)")
