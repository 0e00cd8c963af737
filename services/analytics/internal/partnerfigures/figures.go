// Package partnerfigures answers accounts' console partners list: the
// clicks, leads, conversions, revenue and commission of a page of a
// program's partners over a window of days, from the partner rollups the
// aggregate consumer keeps (partner_buckets, partner_money). Money stays in
// minor units of each currency, never converted: the console shows what
// the ledger holds. Internal only (accounts calls it on the operations
// port with INTERNAL_TOKEN). No HTTP or SQL here.
package partnerfigures

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
)

// MaxPartners bounds the partners of one call: a console page (at most
// 100), so the statements' cost is bounded by the page, never the program.
const MaxPartners = 100

// WindowDays is the window the figures cover, ending with the current
// 15-minute bucket: the last 30 days. A bounded window keeps each
// partner's read to at most 2,880 rollup rows however old the program.
const WindowDays = 30

// ErrTooMany answers more than MaxPartners partners, or none.
var ErrTooMany = fmt.Errorf("between 1 and %d partner_id values are required: %w", MaxPartners, errkind.Invalid)

// Money is one currency's revenue and commission, in its minor units.
type Money struct {
	Currency   string `json:"currency"`
	Revenue    int64  `json:"revenue"`
	Commission int64  `json:"commission"`
}

// Figures are one partner's.
type Figures struct {
	PartnerID   int64   `json:"partner_id"`
	Clicks      int64   `json:"clicks"`
	Leads       int64   `json:"leads"`
	Conversions int64   `json:"conversions"`
	Money       []Money `json:"money"`
}

// Window is the span the figures cover, [From, To).
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Store reads the rollups of the partners, zero figures left out.
type Store interface {
	PartnerFigures(ctx context.Context, programID int64, partners []int64, w Window) (map[int64]*Figures, error)
}

// Service is the use case.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService checks the wiring.
func NewService(store Store, now func() time.Time) (*Service, error) {
	if store == nil || now == nil {
		return nil, errors.New("partnerfigures: store and clock are required")
	}
	return &Service{store: store, now: now}, nil
}

// Figures answers every partner asked for, in the order asked (a partner
// with no activity in the window has zeros and no money).
func (s *Service) Figures(ctx context.Context, programID int64, partners []int64) ([]Figures, Window, error) {
	if len(partners) == 0 || len(partners) > MaxPartners {
		return nil, Window{}, ErrTooMany
	}
	to := s.now().UTC().Truncate(15 * time.Minute).Add(15 * time.Minute)
	w := Window{From: to.AddDate(0, 0, -WindowDays), To: to}
	got, err := s.store.PartnerFigures(ctx, programID, partners, w)
	if err != nil {
		return nil, Window{}, err
	}
	out := make([]Figures, len(partners))
	for i, id := range partners {
		if f, ok := got[id]; ok {
			out[i] = *f
		} else {
			out[i] = Figures{PartnerID: id}
		}
		if out[i].Money == nil {
			out[i].Money = []Money{}
		}
	}
	return out, w, nil
}
