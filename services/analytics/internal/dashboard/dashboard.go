// Package dashboard is analytics' dashboard domain: a program's daily
// performance (GET /api/tracking/performance/:programId) and its
// integration health (GET /api/tracking/status/:programId), read from the
// pre-aggregated tables the consumers keep. It decides access, the date
// ranges, the trends and the roundings; the Store only sums.
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/analytics/internal/sources"
)

// Errors of the dashboard routes; each wraps one kind.
var (
	// ErrNoAccess is performance's one refusal: no session, not an active
	// member, or no such program (the spec answers 403 for all three, so a
	// caller learns nothing about programs it cannot see).
	ErrNoAccess = fmt.Errorf("You do not have access to this program: %w", errkind.Forbidden)
	// ErrNoPermission: status needs tracking:read on the program.
	ErrNoPermission = fmt.Errorf("You do not have the tracking:read permission on this program: %w", errkind.Forbidden)
	// ErrNoSession: status needs a dashboard session.
	ErrNoSession = fmt.Errorf("Missing or invalid session token. Sign in again.: %w", errkind.Unauthenticated)
	// ErrProgramNotFound: status of a program id that names no program.
	ErrProgramNotFound = fmt.Errorf("Program not found: %w", errkind.NotFound)
	ErrPeriod          = fmt.Errorf("period must be one of: 7d, 30d, 90d, all: %w", errkind.Invalid)
	ErrDate            = fmt.Errorf("dateFrom and dateTo must be ISO 8601 dates (YYYY-MM-DD) or times with offset: %w", errkind.Invalid)
	ErrDateOrder       = fmt.Errorf("dateFrom must be on or before dateTo: %w", errkind.Invalid)
	ErrRangeTooLong    = fmt.Errorf("dateFrom to dateTo may span at most 3660 days: %w", errkind.Invalid)
	ErrTimeZone        = fmt.Errorf("timezone must be an IANA time zone name, for example Europe/Paris: %w", errkind.Invalid)
)

// PermissionTrackingRead is the workspace permission status needs.
const PermissionTrackingRead = "tracking:read"

// MaxRangeDays bounds a dateFrom/dateTo range (ten years and a few leap
// days): one row per day is answered, so the range is the cost.
const MaxRangeDays = 3660

// DefaultPeriod is the period when none is sent.
const DefaultPeriod = "7d"

// Program is what the catalog replica knows of a program.
type Program struct {
	ID                  int64
	CreatedAt           time.Time
	PaymentTrackingMode string
	ProcessorStatus     string
	ProcessorAccountID  string
	ChargesEnabled      bool
	PayoutsEnabled      bool
	DetailsSubmitted    bool
	ConnectedAt         *time.Time
}

// Member is a user's workspace membership of a program.
type Member struct {
	Active      bool
	Permissions []string
}

// Can reports whether the membership is active and grants perm.
func (m Member) Can(perm string) bool {
	if !m.Active {
		return false
	}
	for _, p := range m.Permissions {
		if p == perm {
			return true
		}
	}
	return false
}

// Day is one calendar day's figures (Date: the civil date, held at UTC
// midnight); money in US dollars, unrounded.
type Day struct {
	Date                                        time.Time
	Clicks, Leads, Conversions, Sales, Partners int64
	Revenue, Commission                         float64
	// Refunds the ledger applied that day and their dollars (ours, beyond
	// the spec's fields: Overview's refunds tiles).
	Refunds  int64
	Refunded float64
	// FXEstimated: some of the day's money was converted at an earlier
	// day's rate (the rate table has none for that day).
	FXEstimated bool
}

// TestEvent is a test click or lead event kept for status.
type TestEvent struct {
	ID        int64
	Timestamp time.Time
	CreatedAt time.Time
}

// TestEvents are the latest (up to 10) test events of one kind.
type TestEvents struct {
	Count  int
	Latest *TestEvent
}

// LatestEvent is a program's newest real (not test) event of a kind.
type LatestEvent struct {
	ID         int64
	OccurredAt time.Time
}

// LatestEvents are the program's newest real click and lead.
type LatestEvents struct {
	Click, Lead *LatestEvent
}

// Test event kinds.
const (
	KindClick = "click"
	KindLead  = "lead"
)

// Store reads the replica and the aggregates.
type Store interface {
	Program(ctx context.Context, id int64) (Program, bool, error)
	Member(ctx context.Context, programID, userID int64) (Member, bool, error)
	// ActiveMemberProgram is the program when the user is an active member
	// of it (one round trip for the figures routes); false otherwise.
	ActiveMemberProgram(ctx context.Context, programID, userID int64) (Program, bool, error)
	// Days answers the calendar days of the span (in its zone) that have
	// any figure, in order.
	Days(ctx context.Context, programID int64, span Span) ([]Day, error)
	// FirstActivity is the start of the earliest bucket with any figure.
	FirstActivity(ctx context.Context, programID int64) (time.Time, bool, error)
	TestEvents(ctx context.Context, programID int64, kind string) (TestEvents, error)
	// LatestEvents reads the program's latest real click and lead (nil:
	// none seen).
	LatestEvents(ctx context.Context, programID int64) (LatestEvents, error)
	// Sources sums the span per value of each source dimension (unranked),
	// and counts the UTC days whose money used an earlier day's rate.
	Sources(ctx context.Context, programID int64, span Span) (map[string][]sources.Row, int, error)
	// Partners sums the span per partner (unranked), and counts the UTC
	// days whose money used an earlier day's rate.
	Partners(ctx context.Context, programID int64, span Span) ([]PartnerRow, int, error)
	HasApprovedPartner(ctx context.Context, programID int64) (bool, error)
}

// Service answers the dashboard routes.
type Service struct {
	store Store
	now   func() time.Time
}

// New returns the Service; store and now are required.
func New(store Store, now func() time.Time) (*Service, error) {
	if store == nil || now == nil {
		return nil, errors.New("dashboard: store and clock are required")
	}
	return &Service{store: store, now: now}, nil
}

// RangeQuery is the period of a figures route as sent: a period, or a
// dateFrom/dateTo pair, and the time zone whose calendar days are counted
// ("" when not sent: UTC).
type RangeQuery struct {
	Period           string // "" when not sent
	DateFrom, DateTo string // "" when not sent
	TimeZone         string // IANA name; "" when not sent
}

// PerformanceQuery is a performance request. UserID 0: no valid session.
// ProgramID 0: the path named no program (not a positive integer).
type PerformanceQuery struct {
	UserID, ProgramID int64
	RangeQuery
}

// Span is a resolved range: Days calendar days from First (a civil date,
// held at UTC midnight) in Loc.
type Span struct {
	Period string
	Loc    *time.Location
	First  time.Time
	Days   int
	// FromFirst: the span starts at the program's first figure or its
	// creation ("all"), so nothing precedes it.
	FromFirst bool
}

// From is the range's first instant: midnight of First in Loc.
func (s Span) From() time.Time { return midnight(s.First, 0, s.Loc) }

// To is the instant just after the range: midnight of the day after the
// last, in Loc (a DST day is 23 or 25 hours, and counted whole).
func (s Span) To() time.Time { return midnight(s.First, s.Days, s.Loc) }

// Previous is the equal-length range just before.
func (s Span) Previous() Span {
	p := s
	p.First, p.FromFirst = s.First.AddDate(0, 0, -s.Days), false
	return p
}

func midnight(civil time.Time, addDays int, loc *time.Location) time.Time {
	y, m, d := civil.Date()
	return time.Date(y, m, d+addDays, 0, 0, 0, 0, loc)
}

// Trend compares a metric with the previous period. Value nil: previous
// 0 and current not.
type Trend struct {
	Value     *float64
	Direction string
	Previous  float64
}

// Metrics are the period's totals and trends.
type Metrics struct {
	TotalClicks, TotalLeads, TotalConversions, TotalPartners, TotalSales int64
	TotalRevenue, ConversionRate, AverageOrderValue, TotalCommission     float64
	Clicks, Leads, Conversions, Revenue, Partners, Sales, Commission     Trend
	TotalRefunds                                                         int64
	TotalRefunded                                                        float64
}

// Performance is the route's answer: one Day per calendar day (money
// rounded to cents), the metrics, and the range and the previous one.
type Performance struct {
	Days           []Day
	Metrics        Metrics
	Span, Previous Span
	// FXEstimatedDays counts the range's days whose money used an earlier
	// day's rate.
	FXEstimatedDays int
}

// Performance answers the daily figures of a program for the caller.
func (s *Service) Performance(ctx context.Context, q PerformanceQuery) (Performance, error) {
	prog, err := s.memberProgram(ctx, q.UserID, q.ProgramID)
	if err != nil {
		return Performance{}, err
	}
	span, err := s.span(ctx, prog, q.RangeQuery)
	if err != nil {
		return Performance{}, err
	}
	prev := span.Previous()
	cur, err := s.store.Days(ctx, q.ProgramID, span)
	if err != nil {
		return Performance{}, err
	}
	var before []Day
	// "all" starts at the program's first figure or its creation: the
	// period before it has none to read.
	if !span.FromFirst {
		if before, err = s.store.Days(ctx, q.ProgramID, prev); err != nil {
			return Performance{}, err
		}
	}
	out := Performance{Days: fill(cur, span.First, span.Days), Span: span, Previous: prev}
	for _, d := range cur {
		if d.FXEstimated {
			out.FXEstimatedDays++
		}
	}
	out.Metrics = metrics(sum(cur), sum(before))
	return out, nil
}

// memberProgram is the program, when the caller is an active member of
// it; ErrNoAccess for no session, no such program and no membership alike.
func (s *Service) memberProgram(ctx context.Context, userID, programID int64) (Program, error) {
	if userID == 0 || programID == 0 {
		return Program{}, ErrNoAccess
	}
	prog, ok, err := s.store.ActiveMemberProgram(ctx, programID, userID)
	if err != nil {
		return Program{}, err
	}
	if !ok {
		return Program{}, ErrNoAccess
	}
	return prog, nil
}

// MaxTimeZoneLen bounds the timezone parameter (the longest IANA name is
// 32 bytes).
const MaxTimeZoneLen = 64

// location reads the timezone parameter: an IANA name; "" is UTC. "Local"
// (the server's own zone) is not a brand's zone.
func location(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if len(name) > MaxTimeZoneLen || name == "Local" {
		return nil, ErrTimeZone
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, ErrTimeZone
	}
	return loc, nil
}

// span resolves the range. dateFrom and dateTo, both sent, win over
// period and include both days; one without the other is ignored (the
// spec uses them together). "all" runs from the program's creation or its
// earliest figure, whichever is first, to today. Days are the calendar
// days of the time zone.
func (s *Service) span(ctx context.Context, prog Program, q RangeQuery) (Span, error) {
	period := q.Period
	if period == "" {
		period = DefaultPeriod
	}
	loc, err := location(q.TimeZone)
	if err != nil {
		return Span{}, err
	}
	today := civil(s.now(), loc)
	out := Span{Period: period, Loc: loc}
	if q.DateFrom != "" && q.DateTo != "" {
		f, err := parseDate(q.DateFrom)
		if err != nil {
			return Span{}, err
		}
		t, err := parseDate(q.DateTo)
		if err != nil {
			return Span{}, err
		}
		if t.Before(f) {
			return Span{}, ErrDateOrder
		}
		n := int(t.Sub(f).Hours()/24) + 1
		if n > MaxRangeDays {
			return Span{}, ErrRangeTooLong
		}
		out.First, out.Days = f, n
		return out, nil
	}
	switch period {
	case "7d", "30d", "90d":
		n := map[string]int{"7d": 7, "30d": 30, "90d": 90}[period]
		out.First, out.Days = today.AddDate(0, 0, 1-n), n
		return out, nil
	case "all":
		start := today
		if d := civil(prog.CreatedAt, loc); !prog.CreatedAt.IsZero() && d.Before(start) {
			start = d
		}
		if t, ok, err := s.store.FirstActivity(ctx, prog.ID); err != nil {
			return Span{}, err
		} else if d := civil(t, loc); ok && d.Before(start) {
			start = d
		}
		out.First, out.Days, out.FromFirst = start, int(today.Sub(start).Hours()/24)+1, true
		return out, nil
	}
	return Span{}, ErrPeriod
}

// parseDate reads an ISO 8601 date, or a time with offset whose calendar
// date (in its own offset) is the day meant.
func parseDate(s string) (time.Time, error) {
	if len(s) > 64 {
		return time.Time{}, ErrDate
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, ErrDate
	}
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC), nil
}

// civil is t's calendar day in loc, held at UTC midnight.
func civil(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// fill answers one row per day from first, zeros where the store had
// none, money rounded to cents. have is in date order (Store.Days).
func fill(have []Day, first time.Time, days int) []Day {
	out := make([]Day, days)
	for i := range out {
		date := first.AddDate(0, 0, i)
		for len(have) > 0 && civil(have[0].Date, time.UTC).Before(date) {
			have = have[1:] // before the span: not the store's answer, but never shown
		}
		var d Day
		if len(have) > 0 && civil(have[0].Date, time.UTC).Equal(date) {
			d, have = have[0], have[1:]
		}
		d.Date, d.Revenue, d.Commission, d.Refunded = date, round(d.Revenue, 2), round(d.Commission, 2), round(d.Refunded, 2)
		out[i] = d
	}
	return out
}

func sum(days []Day) Day {
	var t Day
	for _, d := range days {
		t.Clicks += d.Clicks
		t.Leads += d.Leads
		t.Conversions += d.Conversions
		t.Sales += d.Sales
		t.Partners += d.Partners
		t.Revenue += d.Revenue
		t.Commission += d.Commission
		t.Refunds += d.Refunds
		t.Refunded += d.Refunded
	}
	t.Revenue, t.Commission, t.Refunded = round(t.Revenue, 2), round(t.Commission, 2), round(t.Refunded, 2)
	return t
}

func metrics(cur, prev Day) Metrics {
	m := Metrics{
		TotalClicks: cur.Clicks, TotalLeads: cur.Leads, TotalConversions: cur.Conversions,
		TotalPartners: cur.Partners, TotalSales: cur.Sales, TotalRevenue: cur.Revenue, TotalCommission: cur.Commission,
		TotalRefunds: cur.Refunds, TotalRefunded: cur.Refunded,
		Clicks:      trend(float64(cur.Clicks), float64(prev.Clicks)),
		Leads:       trend(float64(cur.Leads), float64(prev.Leads)),
		Conversions: trend(float64(cur.Conversions), float64(prev.Conversions)),
		Revenue:     trend(cur.Revenue, prev.Revenue),
		Partners:    trend(float64(cur.Partners), float64(prev.Partners)),
		Sales:       trend(float64(cur.Sales), float64(prev.Sales)),
		Commission:  trend(cur.Commission, prev.Commission),
	}
	if cur.Clicks > 0 {
		m.ConversionRate = round(float64(cur.Conversions)/float64(cur.Clicks)*100, 2)
	}
	if cur.Conversions > 0 {
		m.AverageOrderValue = round(cur.Revenue/float64(cur.Conversions), 2)
	}
	return m
}

// Trend directions.
const (
	Up     = "up"
	Down   = "down"
	Stable = "stable"
)

// trend applies the spec's rules: previous 0 and current above 0 is null
// and up; both 0 is 0 and stable; a change whose magnitude rounds to 0.0
// is stable (and 0).
func trend(cur, prev float64) Trend {
	t := Trend{Previous: prev}
	if prev == 0 {
		if cur > 0 {
			t.Direction = Up
			return t
		}
		zero := 0.0
		t.Value, t.Direction = &zero, Stable
		return t
	}
	change := (cur - prev) / prev * 100
	mag := round(math.Abs(change), 1)
	t.Value = &mag
	switch {
	case mag == 0:
		t.Direction = Stable
	case change > 0:
		t.Direction = Up
	default:
		t.Direction = Down
	}
	return t
}

// round rounds half away from zero to places decimals.
func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	r := math.Round(v*p) / p
	if r == 0 {
		return 0 // never -0 in JSON
	}
	return r
}

// StatusQuery is a status request; UserID 0: no valid session.
type StatusQuery struct {
	UserID    int64
	ProgramID int64 // 0: the path named no program
	RawID     string
}

// Status is the integration health of a program.
type Status struct {
	ProgramID          string
	Pageview, Referral TestEvents
	Program            Program
	HasPartners        bool
	LastUpdated        time.Time
}

// Step statuses.
const (
	Complete = "complete"
	Pending  = "pending"
)

// Processor connection states and payment modes the status reads.
const (
	ProcessorConnected    = "connected"
	ProcessorNotConnected = "not_connected"
	ModeS2S               = "s2s"
	ModeProcessorConnect  = "processor_connect"
)

// PaymentsReady is the payments step: a connected processor, or the
// brand tracks sales itself.
func (p Program) PaymentsReady() bool {
	return p.ProcessorStatus == ProcessorConnected || p.PaymentTrackingMode == ModeS2S
}

// Status answers a program's integration health. A session is checked
// first (401), then the program (404, as the spec asks, for any signed-in
// caller), then the permission (403).
// Activity answers the program's latest real click and lead, for the
// console's Install page, with the status route's access rules (a
// session, the program, tracking:read).
func (s *Service) Activity(ctx context.Context, q StatusQuery) (LatestEvents, error) {
	if q.UserID == 0 {
		return LatestEvents{}, ErrNoSession
	}
	if q.ProgramID == 0 {
		return LatestEvents{}, ErrProgramNotFound
	}
	if _, ok, err := s.store.Program(ctx, q.ProgramID); err != nil {
		return LatestEvents{}, err
	} else if !ok {
		return LatestEvents{}, ErrProgramNotFound
	}
	m, ok, err := s.store.Member(ctx, q.ProgramID, q.UserID)
	if err != nil {
		return LatestEvents{}, err
	}
	if !ok || !m.Can(PermissionTrackingRead) {
		return LatestEvents{}, ErrNoPermission
	}
	return s.store.LatestEvents(ctx, q.ProgramID)
}

func (s *Service) Status(ctx context.Context, q StatusQuery) (Status, error) {
	if q.UserID == 0 {
		return Status{}, ErrNoSession
	}
	if q.ProgramID == 0 {
		return Status{}, ErrProgramNotFound
	}
	prog, ok, err := s.store.Program(ctx, q.ProgramID)
	if err != nil {
		return Status{}, err
	}
	if !ok {
		return Status{}, ErrProgramNotFound
	}
	m, ok, err := s.store.Member(ctx, q.ProgramID, q.UserID)
	if err != nil {
		return Status{}, err
	}
	if !ok || !m.Can(PermissionTrackingRead) {
		return Status{}, ErrNoPermission
	}
	out := Status{ProgramID: q.RawID, Program: prog, LastUpdated: s.now().UTC()}
	if out.Pageview, err = s.store.TestEvents(ctx, q.ProgramID, KindClick); err != nil {
		return Status{}, err
	}
	if out.Referral, err = s.store.TestEvents(ctx, q.ProgramID, KindLead); err != nil {
		return Status{}, err
	}
	if out.HasPartners, err = s.store.HasApprovedPartner(ctx, q.ProgramID); err != nil {
		return Status{}, err
	}
	return out, nil
}
