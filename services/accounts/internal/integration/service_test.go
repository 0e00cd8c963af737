package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
)

// fakeCatalog records the catalog writes the fixtures make.
type fakeCatalog struct {
	mu         sync.Mutex
	program    catalog.Program
	store      *fakeStore
	calls      []string
	linkErr    error // returned once by CreateLink
	syncErr    error
	syncedTo   catalog.Seq
	nextID     int64
	getProgErr error
}

func (c *fakeCatalog) call(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
}

func (c *fakeCatalog) GetProgram(_ context.Context, id int64) (catalog.Program, error) {
	if c.getProgErr != nil {
		return catalog.Program{}, c.getProgErr
	}
	if id != c.program.ID {
		return catalog.Program{}, &catalog.NotFoundError{What: fmt.Sprintf("program %d", id)}
	}
	return c.program, nil
}

func (c *fakeCatalog) CreatePartner(_ context.Context, in catalog.PartnerInput) (catalog.Partner, catalog.Seq, error) {
	c.call("create_partner " + *in.Email)
	c.nextID++
	c.store.partners[*in.Email] = c.nextID
	c.store.seq++
	return catalog.Partner{ID: c.nextID, Name: *in.Name, Email: *in.Email}, c.store.seq, nil
}

func (c *fakeCatalog) AddPartnerToProgram(_ context.Context, programID int64, in catalog.PartnerProgramInput) (catalog.PartnerProgram, catalog.Seq, error) {
	c.call(fmt.Sprintf("enrol %d approved=%t", *in.PartnerID, *in.Approved))
	c.store.enrolled[*in.PartnerID] = true
	c.store.seq++
	return catalog.PartnerProgram{PartnerID: *in.PartnerID, ProgramID: programID, Approved: *in.Approved}, c.store.seq, nil
}

func (c *fakeCatalog) CreateLink(_ context.Context, programID int64, in catalog.LinkInput) (catalog.Link, catalog.Seq, error) {
	c.call("create_link " + *in.Code)
	if err := c.linkErr; err != nil {
		c.linkErr = nil
		return catalog.Link{}, 0, err
	}
	c.nextID++
	c.store.link = &integration.FixtureLink{ID: c.nextID, PartnerID: *in.PartnerID, Active: *in.Active}
	c.store.seq++
	return catalog.Link{ID: c.nextID, ProgramID: programID, PartnerID: *in.PartnerID, Code: *in.Code, Active: *in.Active}, c.store.seq, nil
}

func (c *fakeCatalog) SetLinkActive(_ context.Context, id int64, active bool) (catalog.Link, catalog.Seq, error) {
	c.call(fmt.Sprintf("set_link_active %d %t", id, active))
	c.store.link.Active = active
	c.store.seq++
	return catalog.Link{ID: id, Active: active}, c.store.seq, nil
}

func (c *fakeCatalog) WaitForSync(_ context.Context, seq catalog.Seq, _ time.Duration) error {
	c.call(fmt.Sprintf("wait_for_sync %d", seq))
	c.syncedTo = seq
	return c.syncErr
}

// fakeStore keeps what the service reads, and chain runs in memory.
type fakeStore struct {
	link     *integration.FixtureLink
	partners map[string]int64
	enrolled map[int64]bool
	seq      catalog.Seq
	events   map[string]integration.EventStats
	partnerX bool
	runs     []time.Time
	failRuns error
}

func newFakeStore() *fakeStore {
	return &fakeStore{partners: map[string]int64{}, enrolled: map[int64]bool{}, events: map[string]integration.EventStats{}}
}

func (s *fakeStore) TestEvents(_ context.Context, _ int64, kind string, _ int) (integration.EventStats, error) {
	return s.events[kind], nil
}

func (s *fakeStore) HasApprovedPartners(_ context.Context, _ int64, except string) (bool, error) {
	if except == "" {
		return false, errors.New("fixture address not passed")
	}
	return s.partnerX, nil
}

func (s *fakeStore) FindLink(context.Context, int64, string) (integration.FixtureLink, bool, error) {
	if s.link == nil {
		return integration.FixtureLink{}, false, nil
	}
	return *s.link, true, nil
}

func (s *fakeStore) FindPartnerByEmail(_ context.Context, email string) (int64, bool, error) {
	id, ok := s.partners[email]
	return id, ok, nil
}

func (s *fakeStore) PartnerEnrolled(_ context.Context, _, partnerID int64) (bool, error) {
	return s.enrolled[partnerID], nil
}

func (s *fakeStore) CatalogSeq(context.Context) (catalog.Seq, error) { return s.seq, nil }

func (s *fakeStore) ReserveChainRun(_ context.Context, _ int64, now time.Time, window time.Duration, limit int, _ string) (time.Duration, bool, error) {
	if s.failRuns != nil {
		return 0, false, s.failRuns
	}
	var in []time.Time
	for _, r := range s.runs {
		if r.After(now.Add(-window)) {
			in = append(in, r)
		}
	}
	if len(in) >= limit {
		return in[len(in)-limit].Add(window).Sub(now), false, nil
	}
	s.runs = append(s.runs, now)
	return 0, true, nil
}

// fakeTracker answers test events with increasing ids; saleErr fails only
// sales, as when the sale step of a chain fails after its click and lead.
type fakeTracker struct {
	clicks  []integration.TestClick
	leads   []integration.TestLead
	sales   []integration.TestSale
	err     error
	saleErr error
}

func (t *fakeTracker) TestClick(_ context.Context, c integration.Caller, click integration.TestClick) (integration.Recorded, error) {
	if t.err != nil {
		return integration.Recorded{}, t.err
	}
	t.clicks = append(t.clicks, click)
	return integration.Recorded{EventID: int64(100 + len(t.clicks)), ProgramID: c.ProgramID, Message: "Test click recorded"}, nil
}

func (t *fakeTracker) TestLead(_ context.Context, c integration.Caller, lead integration.TestLead) (integration.Recorded, error) {
	if t.err != nil {
		return integration.Recorded{}, t.err
	}
	t.leads = append(t.leads, lead)
	return integration.Recorded{EventID: int64(200 + len(t.leads)), ProgramID: c.ProgramID, Message: "Test lead recorded"}, nil
}

func (t *fakeTracker) TestSale(_ context.Context, c integration.Caller, sale integration.TestSale) (integration.Recorded, error) {
	if t.err != nil {
		return integration.Recorded{}, t.err
	}
	if t.saleErr != nil {
		return integration.Recorded{}, t.saleErr
	}
	t.sales = append(t.sales, sale)
	return integration.Recorded{EventID: int64(300 + len(t.sales)), ProgramID: c.ProgramID, Message: "Test sale recorded"}, nil
}

// clock is an injected clock tests move by hand.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time      { return c.t }
func (c *clock) Add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }
func caller(programID int64) integration.Caller {
	return integration.Caller{ProgramID: programID, APIKey: "svc_live_x", RequestID: "req-1"}
}

type harness struct {
	svc     integration.Service
	store   *fakeStore
	cat     *fakeCatalog
	tracker *fakeTracker
	clock   *clock
}

func newHarness(t *testing.T, limit int) *harness {
	t.Helper()
	h := &harness{store: newFakeStore(), tracker: &fakeTracker{}, clock: newClock()}
	h.cat = &fakeCatalog{program: catalog.Program{ID: 7, Domain: "brand.example", PaymentTrackingMode: catalog.PaymentProcessorConnect,
		Processor: catalog.ProcessorConnection{Status: catalog.ProcessorNotConnected}}, store: h.store, nextID: 40}
	svc, err := integration.NewService(integration.Config{Store: h.store, Catalog: h.cat, Tracker: h.tracker, Now: h.clock.Now, ChainLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	return h
}

func TestParseEventTypeAcceptsExactlyClickLeadSale(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr string
	}{
		{"click", ""},
		{"lead", ""},
		{"sale", ""},
		{"Click", "Invalid event_type: Click. Valid: click, lead, sale"},
		{"chain", "Invalid event_type: chain. Valid: click, lead, sale"},
		{"undefined", "Invalid event_type: undefined. Valid: click, lead, sale"},
		{"", "Invalid event_type: . Valid: click, lead, sale"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := integration.ParseEventType(tc.in)
			if tc.wantErr == "" {
				if err != nil || string(got) != tc.in {
					t.Fatalf("ParseEventType(%q) = %q, %v", tc.in, got, err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, errkind.Invalid) {
				t.Fatalf("ParseEventType(%q) error = %v, want %q (kind invalid)", tc.in, err, tc.wantErr)
			}
		})
	}
}

func TestStatusSteps(t *testing.T) {
	connectedAt := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	latest := &integration.TestEvent{ID: 3}
	for _, tc := range []struct {
		name                        string
		mode, processor             string
		clicks, leads               integration.EventStats
		wantPage, wantRef, wantPay  string
		wantConnected, wantReadyPay bool
	}{
		{"nothing yet", catalog.PaymentProcessorConnect, catalog.ProcessorNotConnected, integration.EventStats{}, integration.EventStats{},
			"pending", "pending", "pending", false, false},
		{"test click only", catalog.PaymentProcessorConnect, catalog.ProcessorNotConnected, integration.EventStats{Count: 1, Latest: latest}, integration.EventStats{},
			"complete", "pending", "pending", false, false},
		{"click and keyed lead", catalog.PaymentProcessorConnect, catalog.ProcessorNotConnected, integration.EventStats{Count: 2, Latest: latest}, integration.EventStats{Count: 1, Latest: latest},
			"complete", "complete", "pending", false, false},
		{"s2s payments", catalog.PaymentS2S, catalog.ProcessorNotConnected, integration.EventStats{}, integration.EventStats{},
			"pending", "pending", "complete", false, true},
		{"connected processor", catalog.PaymentProcessorConnect, catalog.ProcessorConnected, integration.EventStats{}, integration.EventStats{},
			"pending", "pending", "complete", true, true},
		{"processor in another state", catalog.PaymentProcessorConnect, "restricted", integration.EventStats{}, integration.EventStats{},
			"pending", "pending", "pending", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 10)
			h.cat.program.PaymentTrackingMode = tc.mode
			h.cat.program.Processor = catalog.ProcessorConnection{Status: tc.processor, AccountID: "acct_1", ConnectedAt: &connectedAt}
			h.store.events[integration.KindClick] = tc.clicks
			h.store.events[integration.KindLead] = tc.leads
			st, err := h.svc.Status(context.Background(), 7)
			if err != nil {
				t.Fatal(err)
			}
			if st.Pageview.Step() != tc.wantPage || st.Referrals.Step() != tc.wantRef || st.Payments.Step() != tc.wantPay {
				t.Fatalf("steps = %s/%s/%s, want %s/%s/%s", st.Pageview.Step(), st.Referrals.Step(), st.Payments.Step(), tc.wantPage, tc.wantRef, tc.wantPay)
			}
			if st.Payments.Connected() != tc.wantConnected || st.Payments.Ready() != tc.wantReadyPay {
				t.Fatalf("connected/ready = %t/%t", st.Payments.Connected(), st.Payments.Ready())
			}
			if !st.GeneratedAt.Equal(h.clock.Now()) || st.ProgramID != 7 {
				t.Fatalf("generated %v program %d", st.GeneratedAt, st.ProgramID)
			}
		})
	}
}

func TestStatusOfAMissingProgramIsAFailureNotANotFound(t *testing.T) {
	h := newHarness(t, 10)
	_, err := h.svc.Status(context.Background(), 99)
	if err == nil || errors.Is(err, errkind.Invalid) || errors.Is(err, integration.ErrRateLimited) {
		t.Fatalf("err = %v, want an infrastructure failure", err)
	}
}

func TestTestClickCreatesFixturesThroughTheCatalogThenWaitsForReplicas(t *testing.T) {
	h := newHarness(t, 10)
	rec, err := h.svc.SendTestEvent(context.Background(), caller(7), integration.EventClick)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create_partner test-partner+7@svc.invalid",
		"enrol 41 approved=true",
		"create_link svc-test-7",
		"wait_for_sync 3",
	}
	if fmt.Sprint(h.cat.calls) != fmt.Sprint(want) {
		t.Fatalf("catalog calls = %q, want %q", h.cat.calls, want)
	}
	if rec.EventID != 101 || len(h.tracker.clicks) != 1 {
		t.Fatalf("recorded %+v, clicks %d", rec, len(h.tracker.clicks))
	}
	click := h.tracker.clicks[0]
	if click.AffiliateURL != "https://brand.example/?via=svc-test-7" || click.ProgramID != 7 {
		t.Fatalf("click = %+v", click)
	}
}

func TestFixturesAreRefreshedNotDuplicated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
		want  []string
	}{
		{"all present and active: only the barrier", func(h *harness) {
			h.store.link = &integration.FixtureLink{ID: 5, PartnerID: 9, Active: true}
			h.store.enrolled[9] = true
			h.store.seq = 12
		}, []string{"wait_for_sync 12"}},
		{"disabled link is re-activated", func(h *harness) {
			h.store.link = &integration.FixtureLink{ID: 5, PartnerID: 9, Active: false}
			h.store.enrolled[9] = true
			h.store.seq = 12
		}, []string{"set_link_active 5 true", "wait_for_sync 13"}},
		{"link present, partner not enrolled", func(h *harness) {
			h.store.link = &integration.FixtureLink{ID: 5, PartnerID: 9, Active: true}
		}, []string{"enrol 9 approved=true", "wait_for_sync 1"}},
		{"partner left from an earlier run is reused", func(h *harness) {
			h.store.partners["test-partner+7@svc.invalid"] = 9
			h.store.enrolled[9] = true
		}, []string{"create_link svc-test-7", "wait_for_sync 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 10)
			tc.setup(h)
			if _, err := h.svc.SendTestEvent(context.Background(), caller(7), integration.EventClick); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(h.cat.calls) != fmt.Sprint(tc.want) {
				t.Fatalf("catalog calls = %q, want %q", h.cat.calls, tc.want)
			}
		})
	}
}

func TestConcurrentlyCreatedLinkIsUsed(t *testing.T) {
	h := newHarness(t, 10)
	h.cat.linkErr = &catalog.ConflictError{Message: "a link with this code already exists in this program"}
	h.store.partners["test-partner+7@svc.invalid"] = 9
	h.store.enrolled[9] = true
	store := &racingStore{fakeStore: h.store, theirs: integration.FixtureLink{ID: 77, PartnerID: 9, Active: false}}
	svc, err := integration.NewService(integration.Config{Store: store, Catalog: h.cat, Tracker: h.tracker, Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SendTestEvent(context.Background(), caller(7), integration.EventClick); err != nil {
		t.Fatal(err)
	}
	want := []string{"create_link svc-test-7", "set_link_active 77 true", "wait_for_sync 1"}
	if fmt.Sprint(h.cat.calls) != fmt.Sprint(want) {
		t.Fatalf("catalog calls = %q, want %q", h.cat.calls, want)
	}
}

// racingStore finds no link on the first lookup and another caller's
// (inactive) link afterwards, as when two first test clicks race.
type racingStore struct {
	*fakeStore
	theirs  integration.FixtureLink
	lookups int
}

func (s *racingStore) FindLink(context.Context, int64, string) (integration.FixtureLink, bool, error) {
	s.lookups++
	if s.lookups == 1 {
		return integration.FixtureLink{}, false, nil
	}
	s.fakeStore.link = &s.theirs
	return s.theirs, true, nil
}

func TestTestLeadWaitsForReplicasAndNeedsNoFixture(t *testing.T) {
	h := newHarness(t, 10)
	h.store.seq = 4
	rec, err := h.svc.SendTestEvent(context.Background(), caller(7), integration.EventLead)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(h.cat.calls) != "[wait_for_sync 4]" || rec.EventID != 201 {
		t.Fatalf("calls %q, recorded %+v", h.cat.calls, rec)
	}
	if h.tracker.leads[0].EventName != integration.LeadEventName || h.tracker.leads[0].ProgramID != 7 {
		t.Fatalf("lead = %+v", h.tracker.leads[0])
	}
}

func TestTestSaleWaitsForReplicasAndSendsTheFixedTestAmount(t *testing.T) {
	h := newHarness(t, 10)
	h.store.seq = 4
	rec, err := h.svc.SendTestEvent(context.Background(), caller(7), integration.EventSale)
	if err != nil {
		t.Fatal(err)
	}
	// No fixture: a sale needs no link, only the key in tracking's replica.
	if fmt.Sprint(h.cat.calls) != "[wait_for_sync 4]" || rec.EventID != 301 || rec.ProgramID != 7 {
		t.Fatalf("calls %q, recorded %+v", h.cat.calls, rec)
	}
	want := []integration.TestSale{{ProgramID: 7, AmountCents: 1000, Currency: "USD"}}
	if fmt.Sprint(h.tracker.sales) != fmt.Sprint(want) || len(h.tracker.clicks)+len(h.tracker.leads) != 0 {
		t.Fatalf("sales %+v, clicks %d, leads %d", h.tracker.sales, len(h.tracker.clicks), len(h.tracker.leads))
	}
}

func TestTestSaleIsNotSentBeforeTheReplicaHasTheKey(t *testing.T) {
	h := newHarness(t, 10)
	h.cat.syncErr = fmt.Errorf("late: %w", catalog.ErrSyncTimeout)
	if _, err := h.svc.SendTestEvent(context.Background(), caller(7), integration.EventSale); err == nil {
		t.Fatal("no error")
	}
	if len(h.tracker.sales) != 0 {
		t.Fatal("a sale was sent before the barrier passed")
	}
}

func TestChainRunsClickLeadSaleInOrder(t *testing.T) {
	h := newHarness(t, 10)
	steps, err := h.svc.RunChain(context.Background(), caller(7))
	if err != nil {
		t.Fatal(err)
	}
	want := []integration.ChainStep{
		{Step: integration.EventClick, Status: integration.StepRecorded, EventID: 101},
		{Step: integration.EventLead, Status: integration.StepRecorded, EventID: 201},
		{Step: integration.EventSale, Status: integration.StepRecorded, EventID: 301},
	}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Fatalf("steps = %+v, want %+v", steps, want)
	}
	if h.tracker.leads[0].EventName != integration.ChainLeadEventName {
		t.Fatalf("lead event name %q", h.tracker.leads[0].EventName)
	}
	if s := h.tracker.sales; len(s) != 1 || s[0] != (integration.TestSale{ProgramID: 7, AmountCents: integration.TestSaleAmountCents, Currency: integration.TestSaleCurrency}) {
		t.Fatalf("sales %+v", s)
	}
}

func TestChainWhoseSaleFailsFailsAfterItsClickAndLead(t *testing.T) {
	h := newHarness(t, 10)
	boom := errors.New("boom")
	h.tracker.saleErr = boom
	steps, err := h.svc.RunChain(context.Background(), caller(7))
	if !errors.Is(err, boom) || steps != nil {
		t.Fatalf("steps %+v, err %v", steps, err)
	}
	if len(h.tracker.clicks) != 1 || len(h.tracker.leads) != 1 || len(h.store.runs) != 1 {
		t.Fatalf("clicks %d, leads %d, runs %d: want one of each before the sale", len(h.tracker.clicks), len(h.tracker.leads), len(h.store.runs))
	}
}

func TestChainCapCountsRunsInTheLastHourOfTheInjectedClock(t *testing.T) {
	h := newHarness(t, 3)
	ctx := context.Background()
	run := func() error { _, err := h.svc.RunChain(ctx, caller(7)); return err }
	for i := range 3 {
		if err := run(); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		h.clock.Add(10 * time.Minute)
	}
	// 30 minutes after the first run: refused until the first leaves the hour.
	clicks := len(h.tracker.clicks)
	calls := len(h.cat.calls)
	err := run()
	var lim *integration.ChainLimitError
	if !errors.As(err, &lim) || !errors.Is(err, integration.ErrRateLimited) {
		t.Fatalf("4th run: %v", err)
	}
	if lim.RetryAfter != 30*time.Minute || lim.Error() != "Too many synthetic chains (max 3/program/hour)." {
		t.Fatalf("retry after %v, message %q", lim.RetryAfter, lim.Error())
	}
	if len(h.tracker.clicks) != clicks {
		t.Fatal("a refused chain sent a click")
	}
	if len(h.cat.calls) == calls {
		t.Fatal("the fixtures were not refreshed before the cap check")
	}
	h.clock.Add(30*time.Minute - time.Nanosecond)
	if err := run(); !errors.As(err, &lim) || lim.RetryAfter != time.Nanosecond {
		t.Fatalf("just before the hour: %v", err)
	}
	h.clock.Add(time.Nanosecond)
	if err := run(); err != nil {
		t.Fatalf("once the first run left the hour: %v", err)
	}
}

func TestDefaultChainCapIsTenAndMessageMatchesTheContract(t *testing.T) {
	h := newHarness(t, 0)
	var err error
	for range 11 {
		_, err = h.svc.RunChain(context.Background(), caller(7))
	}
	if err == nil || err.Error() != "Too many synthetic chains (max 10/program/hour)." {
		t.Fatalf("11th chain: %v", err)
	}
}

func TestFailuresAreNotBusinessErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		set  func(h *harness)
		run  func(h *harness) error
	}{
		{"tracker fails on click", func(h *harness) { h.tracker.err = boom }, func(h *harness) error {
			_, err := h.svc.SendTestEvent(context.Background(), caller(7), integration.EventClick)
			return err
		}},
		{"replica never catches up", func(h *harness) { h.cat.syncErr = fmt.Errorf("late: %w", catalog.ErrSyncTimeout) }, func(h *harness) error {
			_, err := h.svc.SendTestEvent(context.Background(), caller(7), integration.EventLead)
			return err
		}},
		{"chain run cannot be recorded", func(h *harness) { h.store.failRuns = boom }, func(h *harness) error {
			_, err := h.svc.RunChain(context.Background(), caller(7))
			return err
		}},
		{"tracker fails on a test sale", func(h *harness) { h.tracker.err = boom }, func(h *harness) error {
			_, err := h.svc.SendTestEvent(context.Background(), caller(7), integration.EventSale)
			return err
		}},
		{"chain sale step fails after click and lead", func(h *harness) { h.tracker.saleErr = boom }, func(h *harness) error {
			_, err := h.svc.RunChain(context.Background(), caller(7))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 10)
			tc.set(h)
			err := tc.run(h)
			if err == nil || errors.Is(err, errkind.Invalid) || errors.Is(err, integration.ErrRateLimited) {
				t.Fatalf("err = %v, want a failure of no business kind", err)
			}
		})
	}
}

func TestCountsForVerification(t *testing.T) {
	for _, tc := range []struct {
		kind         string
		test, viaKey bool
		want         bool
	}{
		{integration.KindClick, true, false, false},
		{integration.KindClick, true, true, true},
		{integration.KindClick, false, false, false},
		{integration.KindLead, true, true, true},
		{integration.KindLead, true, false, false},
		{integration.KindLead, false, true, false},
		{"visit", true, true, false},
	} {
		t.Run(fmt.Sprintf("%s test=%t key=%t", tc.kind, tc.test, tc.viaKey), func(t *testing.T) {
			if got := integration.CountsForVerification(tc.kind, tc.test, tc.viaKey); got != tc.want {
				t.Fatalf("got %t", got)
			}
		})
	}
}

func TestNewServiceRefusesABadCap(t *testing.T) {
	_, err := integration.NewService(integration.Config{Store: newFakeStore(), Catalog: &fakeCatalog{}, Tracker: &fakeTracker{}, Now: time.Now, ChainLimit: -1})
	if err == nil {
		t.Fatal("negative cap accepted")
	}
}
