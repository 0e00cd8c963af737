package endpoints

import (
	"context"
	"fmt"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard"
	"github.com/svc-dev/svc/services/analytics/internal/sources"
)

// SourcesRequest is a sources or partners request (dashboard session or
// program key).
type SourcesRequest = dashboard.SourcesQuery

// SourcesMeta is the range answered.
type SourcesMeta struct {
	Period   string `json:"period"`
	DateFrom string `json:"dateFrom"`
	DateTo   string `json:"dateTo"`
	TimeZone string `json:"timezone"`
	// FXEstimatedDays counts the UTC days whose money was converted at the
	// nearest earlier rate (absent when none), as performance's meta.
	FXEstimatedDays int `json:"fxEstimatedDays,omitempty"`
}

func sourcesMeta(s dashboard.Span, estimated int) SourcesMeta {
	r := rangeView(s)
	return SourcesMeta{Period: s.Period, DateFrom: r.DateFrom, DateTo: r.DateTo, TimeZone: s.Loc.String(), FXEstimatedDays: estimated}
}

// SourcesResponse is {data: {referrers: [...], utm_sources: [...], ...}, meta}.
type SourcesResponse struct {
	Data map[string][]sources.Row `json:"data"`
	Meta SourcesMeta              `json:"meta"`
	Err  error                    `json:"-"`
}

// Failed implements endpoint.Failer.
func (r SourcesResponse) Failed() error { return r.Err }

// PartnerView is one data[] row of the partners route.
type PartnerView struct {
	PartnerID   int64   `json:"partnerId"`
	Name        string  `json:"name"`
	Clicks      int64   `json:"clicks"`
	Leads       int64   `json:"leads"`
	Conversions int64   `json:"conversions"`
	Revenue     float64 `json:"revenue"`
	Commission  float64 `json:"commission"`
}

// PartnersResponse is {data: [...], meta}.
type PartnersResponse struct {
	Data []PartnerView `json:"data"`
	Meta SourcesMeta   `json:"meta"`
	Err  error         `json:"-"`
}

// Failed implements endpoint.Failer.
func (r PartnersResponse) Failed() error { return r.Err }

var (
	_ endpoint.Failer = SourcesResponse{}
	_ endpoint.Failer = PartnersResponse{}
)

// failure carries a business error in the response and returns an
// infrastructure one as the endpoint's error too (traces and metrics
// count it).
func failure[R any](r R, err error) (any, error) {
	if errkind.Status(err) >= 500 {
		return r, err
	}
	return r, nil
}

func makeSources(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		s, err := svc.Sources(ctx, request.(SourcesRequest))
		if err != nil {
			return failure(SourcesResponse{Err: err}, err)
		}
		return SourcesResponse{Data: s.Dims, Meta: sourcesMeta(s.Span, s.FXEstimatedDays)}, nil
	}
}

func makePartners(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		p, err := svc.Partners(ctx, request.(SourcesRequest))
		if err != nil {
			return failure(PartnersResponse{Err: err}, err)
		}
		rows := make([]PartnerView, len(p.Rows))
		for i, r := range p.Rows {
			name := r.Name
			if name == "" {
				name = fmt.Sprintf("Partner #%d", r.ID) // not replicated yet
			}
			rows[i] = PartnerView{PartnerID: r.ID, Name: name, Clicks: r.Clicks, Leads: r.Leads, Conversions: r.Conversions,
				Revenue: r.Revenue, Commission: r.Commission}
		}
		return PartnersResponse{Data: rows, Meta: sourcesMeta(p.Span, p.FXEstimatedDays)}, nil
	}
}
