// Package endpoints adapts the dashboard routes to go-kit endpoints and
// shapes their answers exactly as the spec's tables name them. Business
// errors travel in the response (Failer); only infrastructure failures are
// endpoint errors.
package endpoints

import (
	"context"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard"
)

// Service is the dashboard's use cases (*dashboard.Service).
type Service interface {
	Performance(ctx context.Context, q dashboard.PerformanceQuery) (dashboard.Performance, error)
	Status(ctx context.Context, q dashboard.StatusQuery) (dashboard.Status, error)
	Sources(ctx context.Context, q dashboard.SourcesQuery) (dashboard.Sources, error)
	Partners(ctx context.Context, q dashboard.SourcesQuery) (dashboard.Partners, error)
	Activity(ctx context.Context, q dashboard.StatusQuery) (dashboard.LatestEvents, error)
}

// Set holds the endpoints.
type Set struct {
	Performance endpoint.Endpoint
	Status      endpoint.Endpoint
	Sources     endpoint.Endpoint
	Partners    endpoint.Endpoint
	Activity    endpoint.Endpoint
}

// New builds the set, each endpoint decorated with mw.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Performance: obs.Decorate("performance", makePerformance(svc), mw...),
		Status:      obs.Decorate("status", makeStatus(svc), mw...),
		Sources:     obs.Decorate("sources", makeSources(svc), mw...),
		Partners:    obs.Decorate("partners", makePartners(svc), mw...),
		Activity:    obs.Decorate("activity", makeActivity(svc), mw...),
	}
}

// iso is the spec's ISO 8601 form of a time (UTC, milliseconds).
func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// isoIn is a range bound in the zone the days were counted in: UTC reads
// as iso does ("Z"), another zone with its offset that day.
func isoIn(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02T15:04:05.000Z07:00")
}

// rangeView is a span's first instant and its last millisecond.
func rangeView(s dashboard.Span) Range {
	return Range{DateFrom: isoIn(s.From(), s.Loc), DateTo: isoIn(s.To().Add(-time.Millisecond), s.Loc)}
}

func metaView(p dashboard.Performance) MetaView {
	cur := p.Span
	r := rangeView(cur)
	m := MetaView{Period: cur.Period, DateFrom: r.DateFrom, DateTo: r.DateTo, PreviousPeriod: rangeView(p.Previous), FXEstimatedDays: p.FXEstimatedDays}
	if cur.Loc != time.UTC {
		m.TimeZone = cur.Loc.String()
	}
	return m
}

func isoOrNil(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := iso(*t)
	return &s
}

// DayRow is one data[] row.
type DayRow struct {
	Date        string  `json:"date"`
	Period      string  `json:"period"`
	Clicks      int64   `json:"clicks"`
	Leads       int64   `json:"leads"`
	Conversions int64   `json:"conversions"`
	Revenue     float64 `json:"revenue"`
	Partners    int64   `json:"partners"`
	Sales       int64   `json:"sales"`
	Commission  float64 `json:"commission"`
}

// TrendView is the trend object.
type TrendView struct {
	Trend          *float64 `json:"trend"`
	TrendDirection string   `json:"trendDirection"`
	Previous       float64  `json:"previous"`
}

func trendView(t dashboard.Trend) TrendView {
	return TrendView{Trend: t.Value, TrendDirection: t.Direction, Previous: t.Previous}
}

// MetricsView is metrics.
type MetricsView struct {
	TotalClicks             int64   `json:"totalClicks"`
	TotalLeads              int64   `json:"totalLeads"`
	TotalConversions        int64   `json:"totalConversions"`
	TotalRevenue            float64 `json:"totalRevenue"`
	ConversionRate          float64 `json:"conversionRate"`
	AverageOrderValue       float64 `json:"averageOrderValue"`
	TotalPartners           int64   `json:"totalPartners"`
	TotalSales              int64   `json:"totalSales"`
	TotalPartnersCommission float64 `json:"totalPartnersCommission"`
	// Ours, beyond the spec's table: refunds the ledger applied in the
	// period (by the refund's day) and their dollars, 2 decimals.
	TotalRefunds        int64     `json:"totalRefunds"`
	TotalRefundedAmount float64   `json:"totalRefundedAmount"`
	ClicksTrend         TrendView `json:"clicksTrend"`
	LeadsTrend          TrendView `json:"leadsTrend"`
	ConversionsTrend    TrendView `json:"conversionsTrend"`
	RevenueTrend        TrendView `json:"revenueTrend"`
	PartnersTrend       TrendView `json:"partnersTrend"`
	SalesTrend          TrendView `json:"salesTrend"`
	CommissionTrend     TrendView `json:"commissionTrend"`
}

// Range is a dateFrom/dateTo pair.
type Range struct {
	DateFrom string `json:"dateFrom"`
	DateTo   string `json:"dateTo"`
}

// MetaView is meta.
type MetaView struct {
	Period         string `json:"period"`
	DateFrom       string `json:"dateFrom"`
	DateTo         string `json:"dateTo"`
	PreviousPeriod Range  `json:"previousPeriod"`
	// TimeZone echoes the timezone parameter; absent for UTC (the spec's
	// meta, unchanged).
	TimeZone string `json:"timezone,omitempty"`
	// FXEstimatedDays counts the days whose money was converted at the
	// nearest earlier rate, the rate table having none for that day;
	// absent when every amount had its own day's rate.
	FXEstimatedDays int `json:"fxEstimatedDays,omitempty"`
}

// PerformanceRequest is the route's input: the verified session's user
// (0: none) and the raw path and query values.
type PerformanceRequest = dashboard.PerformanceQuery

// PerformanceResponse is {data, metrics, meta}.
type PerformanceResponse struct {
	Data    []DayRow    `json:"data"`
	Metrics MetricsView `json:"metrics"`
	Meta    MetaView    `json:"meta"`
	Err     error       `json:"-"`
}

var _ endpoint.Failer = PerformanceResponse{}

// Failed implements endpoint.Failer.
func (r PerformanceResponse) Failed() error { return r.Err }

func makePerformance(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		p, err := svc.Performance(ctx, request.(PerformanceRequest))
		if err != nil {
			if errkind.Status(err) >= 500 {
				return PerformanceResponse{Err: err}, err
			}
			return PerformanceResponse{Err: err}, nil
		}
		rows := make([]DayRow, len(p.Days))
		for i, d := range p.Days {
			date := d.Date.Format(time.DateOnly)
			// data[].sales is always 0 (the spec's table); paid sales are
			// metrics.totalSales.
			rows[i] = DayRow{Date: date, Period: date, Clicks: d.Clicks, Leads: d.Leads, Conversions: d.Conversions,
				Revenue: d.Revenue, Partners: d.Partners, Commission: d.Commission}
		}
		m := p.Metrics
		return PerformanceResponse{
			Data: rows,
			Metrics: MetricsView{
				TotalClicks: m.TotalClicks, TotalLeads: m.TotalLeads, TotalConversions: m.TotalConversions, TotalRevenue: m.TotalRevenue,
				ConversionRate: m.ConversionRate, AverageOrderValue: m.AverageOrderValue, TotalPartners: m.TotalPartners,
				TotalSales: m.TotalSales, TotalPartnersCommission: m.TotalCommission,
				TotalRefunds: m.TotalRefunds, TotalRefundedAmount: m.TotalRefunded,
				ClicksTrend: trendView(m.Clicks), LeadsTrend: trendView(m.Leads), ConversionsTrend: trendView(m.Conversions),
				RevenueTrend: trendView(m.Revenue), PartnersTrend: trendView(m.Partners), SalesTrend: trendView(m.Sales),
				CommissionTrend: trendView(m.Commission),
			},
			Meta: metaView(p),
		}, nil
	}
}

// LatestTestEvent is {id, timestamp, createdAt}.
type LatestTestEvent struct {
	ID        int64  `json:"id"`
	Timestamp string `json:"timestamp"`
	CreatedAt string `json:"createdAt"`
}

// TestEventsView is statistics.pageview / statistics.referrals.
type TestEventsView struct {
	TestEventCount  int              `json:"testEventCount"`
	HasTestEvents   bool             `json:"hasTestEvents"`
	LatestTestEvent *LatestTestEvent `json:"latestTestEvent"`
}

func testEvents(t dashboard.TestEvents) TestEventsView {
	v := TestEventsView{TestEventCount: t.Count, HasTestEvents: t.Count > 0}
	if t.Latest != nil {
		v.LatestTestEvent = &LatestTestEvent{ID: t.Latest.ID, Timestamp: iso(t.Latest.Timestamp), CreatedAt: iso(t.Latest.CreatedAt)}
	}
	return v
}

// PaymentsView is statistics.payments.
type PaymentsView struct {
	PaymentTrackingMode       string  `json:"paymentTrackingMode"`
	MethodReady               bool    `json:"methodReady"`
	ProcessorConnectionStatus string  `json:"processorConnectionStatus"`
	IsProcessorConnected      bool    `json:"isProcessorConnected"`
	ProcessorAccountID        *string `json:"processorAccountId"`
	ChargesEnabled            bool    `json:"chargesEnabled"`
	PayoutsEnabled            bool    `json:"payoutsEnabled"`
	DetailsSubmitted          bool    `json:"detailsSubmitted"`
	ConnectionDate            *string `json:"connectionDate"`
}

// StepStatuses is stepStatuses.
type StepStatuses struct {
	Pageview  string `json:"pageview"`
	Referrals string `json:"referrals"`
	Payments  string `json:"payments"`
}

// Statistics is statistics.
type Statistics struct {
	Pageview  TestEventsView `json:"pageview"`
	Referrals TestEventsView `json:"referrals"`
	Payments  PaymentsView   `json:"payments"`
}

// StatusData is data.
type StatusData struct {
	ProgramID    string       `json:"programId"`
	StepStatuses StepStatuses `json:"stepStatuses"`
	Statistics   Statistics   `json:"statistics"`
	HasPartners  bool         `json:"hasPartners"`
	LastUpdated  string       `json:"lastUpdated"`
}

// LatestEventView is a real event's id and time (ISO, UTC).
type LatestEventView struct {
	ID        int64  `json:"id"`
	Timestamp string `json:"timestamp"`
}

// ActivityData is the program's latest real click and lead, null when
// none was seen.
type ActivityData struct {
	LatestClick *LatestEventView `json:"latestClick"`
	LatestLead  *LatestEventView `json:"latestLead"`
}

// ActivityResponse is {data}.
type ActivityResponse struct {
	Data ActivityData `json:"data"`
	Err  error        `json:"-"`
}

// Failed implements endpoint.Failer.
func (r ActivityResponse) Failed() error { return r.Err }

func latestView(e *dashboard.LatestEvent) *LatestEventView {
	if e == nil {
		return nil
	}
	return &LatestEventView{ID: e.ID, Timestamp: iso(e.OccurredAt)}
}

func makeActivity(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		a, err := svc.Activity(ctx, request.(StatusRequest))
		if err != nil {
			if errkind.Status(err) >= 500 {
				return ActivityResponse{Err: err}, err
			}
			return ActivityResponse{Err: err}, nil
		}
		return ActivityResponse{Data: ActivityData{LatestClick: latestView(a.Click), LatestLead: latestView(a.Lead)}}, nil
	}
}

// StatusRequest is the route's input.
type StatusRequest = dashboard.StatusQuery

// StatusResponse is {data}.
type StatusResponse struct {
	Data StatusData `json:"data"`
	Err  error      `json:"-"`
}

var _ endpoint.Failer = StatusResponse{}

// Failed implements endpoint.Failer.
func (r StatusResponse) Failed() error { return r.Err }

func step(done bool) string {
	if done {
		return dashboard.Complete
	}
	return dashboard.Pending
}

func makeStatus(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		s, err := svc.Status(ctx, request.(StatusRequest))
		if err != nil {
			if errkind.Status(err) >= 500 {
				return StatusResponse{Err: err}, err
			}
			return StatusResponse{Err: err}, nil
		}
		p := s.Program
		connected := p.ProcessorStatus == dashboard.ProcessorConnected
		pay := PaymentsView{
			PaymentTrackingMode: p.PaymentTrackingMode, MethodReady: p.PaymentsReady(), ProcessorConnectionStatus: p.ProcessorStatus,
			IsProcessorConnected: connected, ChargesEnabled: p.ChargesEnabled, PayoutsEnabled: p.PayoutsEnabled,
			DetailsSubmitted: p.DetailsSubmitted, ConnectionDate: isoOrNil(p.ConnectedAt),
		}
		if connected && p.ProcessorAccountID != "" {
			id := p.ProcessorAccountID
			pay.ProcessorAccountID = &id
		}
		return StatusResponse{Data: StatusData{
			ProgramID: s.ProgramID,
			StepStatuses: StepStatuses{
				Pageview: step(s.Pageview.Count > 0), Referrals: step(s.Referral.Count > 0), Payments: step(p.PaymentsReady()),
			},
			Statistics:  Statistics{Pageview: testEvents(s.Pageview), Referrals: testEvents(s.Referral), Payments: pay},
			HasPartners: s.HasPartners,
			LastUpdated: iso(s.LastUpdated),
		}}, nil
	}
}
