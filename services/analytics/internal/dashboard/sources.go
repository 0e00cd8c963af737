package dashboard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/analytics/internal/sources"
)

// Bounds of the limit parameter of the sources and partners routes.
const (
	DefaultLimit = 10
	MaxLimit     = 100
)

// ErrLimit: limit is not a whole number in bounds.
var ErrLimit = fmt.Errorf("limit must be a whole number from 1 to 100: %w", errkind.Invalid)

// SourcesQuery is a sources or partners request: from the dashboard (a
// session's UserID and the path's ProgramID, checked like performance) or
// with a program API key (ViaKey: ProgramID is the key's own program).
type SourcesQuery struct {
	UserID, ProgramID int64
	ViaKey            bool
	Limit             string // "" when not sent
	RangeQuery
}

// Sources is where a period's traffic and money came from: for each
// dimension (sources.Dimensions) its values ranked by revenue, then
// conversions, then clicks.
type Sources struct {
	Span Span
	Dims map[string][]sources.Row
	// FXEstimatedDays counts the UTC days of the range whose money was
	// converted at an earlier day's rate.
	FXEstimatedDays int
}

// PartnerRow is one partner's figures over a period; money in dollars.
type PartnerRow struct {
	ID                         int64
	Name                       string
	Clicks, Leads, Conversions int64
	Revenue, Commission        float64
}

// Partners is a period's top partners, ranked like sources.
type Partners struct {
	Span            Span
	Rows            []PartnerRow
	FXEstimatedDays int // as Sources'
}

// Sources answers where the program's traffic and money came from.
func (s *Service) Sources(ctx context.Context, q SourcesQuery) (Sources, error) {
	span, limit, err := s.sourcesRange(ctx, q)
	if err != nil {
		return Sources{}, err
	}
	dims, estimated, err := s.store.Sources(ctx, q.ProgramID, span)
	if err != nil {
		return Sources{}, err
	}
	out := Sources{Span: span, Dims: make(map[string][]sources.Row, len(sources.Dimensions)), FXEstimatedDays: estimated}
	for _, d := range sources.Dimensions {
		rows := sources.Rank(dims[d], limit)
		for i := range rows {
			rows[i].Revenue = round(rows[i].Revenue, 2)
		}
		if rows == nil {
			rows = []sources.Row{}
		}
		out.Dims[d] = rows
	}
	return out, nil
}

// Partners answers the partners that brought the most revenue, then
// conversions, then clicks.
func (s *Service) Partners(ctx context.Context, q SourcesQuery) (Partners, error) {
	span, limit, err := s.sourcesRange(ctx, q)
	if err != nil {
		return Partners{}, err
	}
	rows, estimated, err := s.store.Partners(ctx, q.ProgramID, span)
	if err != nil {
		return Partners{}, err
	}
	// Partners tie on their id, zero-padded so the text order is the
	// numeric one.
	rows = sources.RankBy(rows, limit, func(p PartnerRow) sources.Ranked {
		return sources.Ranked{Revenue: p.Revenue, Conversions: p.Conversions, Clicks: p.Clicks, Tie: fmt.Sprintf("%020d", p.ID)}
	})
	for i := range rows {
		rows[i].Revenue, rows[i].Commission = round(rows[i].Revenue, 2), round(rows[i].Commission, 2)
	}
	if rows == nil {
		rows = []PartnerRow{}
	}
	return Partners{Span: span, Rows: rows, FXEstimatedDays: estimated}, nil
}

// sourcesRange checks access (a key's own program needs none) and reads
// the range and the limit.
func (s *Service) sourcesRange(ctx context.Context, q SourcesQuery) (Span, int, error) {
	var prog Program
	if q.ViaKey {
		p, ok, err := s.store.Program(ctx, q.ProgramID)
		if err != nil {
			return Span{}, 0, err
		}
		if ok {
			prog = p
		} else {
			// The key was replicated before its program: "all" then starts
			// at the first figure.
			prog = Program{ID: q.ProgramID}
		}
	} else {
		p, err := s.memberProgram(ctx, q.UserID, q.ProgramID)
		if err != nil {
			return Span{}, 0, err
		}
		prog = p
	}
	limit := DefaultLimit
	if q.Limit != "" {
		n, err := strconv.Atoi(q.Limit)
		if err != nil || n < 1 || n > MaxLimit {
			return Span{}, 0, ErrLimit
		}
		limit = n
	}
	span, err := s.span(ctx, prog, q.RangeQuery)
	return span, limit, err
}
