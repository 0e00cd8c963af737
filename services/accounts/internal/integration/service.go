package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// Service is the command-line integration use cases.
type Service interface {
	// Status reports the program's integration state.
	Status(ctx context.Context, programID int64) (Status, error)
	// SendTestEvent sends one test event through tracking.
	SendTestEvent(ctx context.Context, c Caller, t EventType) (Recorded, error)
	// RunChain runs click → lead → sale on the program's test fixtures,
	// capped per program per hour.
	RunChain(ctx context.Context, c Caller) ([]ChainStep, error)
}

// Defaults of Config.
const (
	DefaultChainLimit  = 10
	DefaultChainWindow = time.Hour
	DefaultSyncTimeout = 10 * time.Second
)

// Fixture names. The partner's address is on the reserved .invalid domain
// (RFC 2606), so no mail can ever reach a real person.
const (
	FixturePartnerName = "svc test partner"
	// Event names of test leads, so they can be told apart in tracking.
	LeadEventName      = "svc_cli_test_event"
	ChainLeadEventName = "svc_cli_synthetic_chain"
)

// FixturePartnerEmail is the test partner's address for a program.
func FixturePartnerEmail(programID int64) string {
	return "test-partner+" + strconv.FormatInt(programID, 10) + "@svc.invalid"
}

// FixtureCode is the code of the program's test link.
func FixtureCode(programID int64) string {
	return catalog.FixtureLinkCodePrefix + strconv.FormatInt(programID, 10)
}

// Config wires a service.
type Config struct {
	Store   Store
	Catalog Catalog
	Tracker Tracker
	Now     func() time.Time
	// ChainLimit runs per program per ChainWindow.
	ChainLimit  int
	ChainWindow time.Duration
	// SyncTimeout bounds the wait for tracking's catalog replica to hold
	// the fixtures and key before a test event is sent.
	SyncTimeout time.Duration
}

type service struct{ cfg Config }

// NewService validates the wiring and fills defaults.
func NewService(cfg Config) (Service, error) {
	if cfg.Store == nil || cfg.Catalog == nil || cfg.Tracker == nil || cfg.Now == nil {
		return nil, errors.New("integration: store, catalog, tracker and clock are required")
	}
	if cfg.ChainLimit == 0 {
		cfg.ChainLimit = DefaultChainLimit
	}
	if cfg.ChainLimit < 1 {
		return nil, fmt.Errorf("integration: chain limit must be at least 1, got %d", cfg.ChainLimit)
	}
	if cfg.ChainWindow <= 0 {
		cfg.ChainWindow = DefaultChainWindow
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = DefaultSyncTimeout
	}
	return &service{cfg: cfg}, nil
}

func (s *service) Status(ctx context.Context, programID int64) (Status, error) {
	p, err := s.cfg.Catalog.GetProgram(ctx, programID)
	if err != nil {
		// The key authenticated, so its program exists: a miss here is a
		// broken invariant, not the caller's error.
		return Status{}, fmt.Errorf("load program %d: %w", programID, err)
	}
	st := Status{
		ProgramID: programID,
		Payments: Payments{
			Mode:             p.PaymentTrackingMode,
			ConnectionStatus: p.Processor.Status,
			AccountID:        p.Processor.AccountID,
			ChargesEnabled:   p.Processor.ChargesEnabled,
			PayoutsEnabled:   p.Processor.PayoutsEnabled,
			DetailsSubmitted: p.Processor.DetailsSubmitted,
			ConnectedAt:      p.Processor.ConnectedAt,
		},
		GeneratedAt: s.cfg.Now().UTC(),
	}
	if st.Pageview, err = s.cfg.Store.TestEvents(ctx, programID, KindClick, MaxListedTestEvents); err != nil {
		return Status{}, fmt.Errorf("test clicks of program %d: %w", programID, err)
	}
	if st.Referrals, err = s.cfg.Store.TestEvents(ctx, programID, KindLead, MaxListedTestEvents); err != nil {
		return Status{}, fmt.Errorf("test leads of program %d: %w", programID, err)
	}
	if st.HasPartners, err = s.cfg.Store.HasApprovedPartners(ctx, programID, FixturePartnerEmail(programID)); err != nil {
		return Status{}, fmt.Errorf("partners of program %d: %w", programID, err)
	}
	return st, nil
}

func (s *service) SendTestEvent(ctx context.Context, c Caller, t EventType) (Recorded, error) {
	switch t {
	case EventClick:
		fx, err := s.ensureFixtures(ctx, c.ProgramID)
		if err != nil {
			return Recorded{}, err
		}
		return s.cfg.Tracker.TestClick(ctx, c, fx.click)
	case EventLead:
		// No fixture is needed, but the key must be in tracking's replica.
		if err := s.syncReplicas(ctx); err != nil {
			return Recorded{}, err
		}
		return s.cfg.Tracker.TestLead(ctx, c, TestLead{ProgramID: c.ProgramID, EventName: LeadEventName})
	case EventSale:
		// Like the lead: no fixture, but the key must be in tracking's replica.
		if err := s.syncReplicas(ctx); err != nil {
			return Recorded{}, err
		}
		return s.cfg.Tracker.TestSale(ctx, c, testSale(c.ProgramID))
	}
	return Recorded{}, &InvalidEventTypeError{Value: string(t)}
}

func (s *service) RunChain(ctx context.Context, c Caller) ([]ChainStep, error) {
	fx, err := s.ensureFixtures(ctx, c.ProgramID)
	if err != nil {
		return nil, err
	}
	// The cap is checked after the fixtures, as the contract says: a refused
	// chain may still have created or refreshed them.
	retry, ok, err := s.cfg.Store.ReserveChainRun(ctx, c.ProgramID, s.cfg.Now(), s.cfg.ChainWindow, s.cfg.ChainLimit, c.RequestID)
	if err != nil {
		return nil, fmt.Errorf("reserve chain run for program %d: %w", c.ProgramID, err)
	}
	if !ok {
		return nil, &ChainLimitError{Limit: s.cfg.ChainLimit, RetryAfter: retry}
	}
	steps := make([]ChainStep, 0, 3)
	click, err := s.cfg.Tracker.TestClick(ctx, c, fx.click)
	if err != nil {
		return nil, fmt.Errorf("chain click: %w", err)
	}
	steps = append(steps, ChainStep{Step: EventClick, Status: StepRecorded, EventID: click.EventID})
	lead, err := s.cfg.Tracker.TestLead(ctx, c, TestLead{ProgramID: c.ProgramID, EventName: ChainLeadEventName})
	if err != nil {
		return nil, fmt.Errorf("chain lead: %w", err)
	}
	steps = append(steps, ChainStep{Step: EventLead, Status: StepRecorded, EventID: lead.EventID})
	sale, err := s.cfg.Tracker.TestSale(ctx, c, testSale(c.ProgramID))
	if err != nil {
		return nil, fmt.Errorf("chain sale: %w", err)
	}
	return append(steps, ChainStep{Step: EventSale, Status: StepRecorded, EventID: sale.EventID}), nil
}

func testSale(programID int64) TestSale {
	return TestSale{ProgramID: programID, AmountCents: TestSaleAmountCents, Currency: TestSaleCurrency}
}

type fixtures struct {
	click TestClick
}

// ensureFixtures creates the program's test partner, its approved
// enrolment and the test link, or re-activates the link, through the
// catalog service (so the catalog events reach tracking), then waits until
// tracking's replica has them.
//
// Two first calls racing may each create a partner; the link's unique code
// decides which one the fixtures use, and the other stays unused (and out of
// hasPartners, which leaves the fixture address out).
func (s *service) ensureFixtures(ctx context.Context, programID int64) (fixtures, error) {
	p, err := s.cfg.Catalog.GetProgram(ctx, programID)
	if err != nil {
		return fixtures{}, fmt.Errorf("load program %d: %w", programID, err)
	}
	code := FixtureCode(programID)
	link, found, err := s.cfg.Store.FindLink(ctx, programID, code)
	if err != nil {
		return fixtures{}, fmt.Errorf("find test link: %w", err)
	}
	partnerID := link.PartnerID
	if !found {
		if partnerID, err = s.fixturePartner(ctx, programID); err != nil {
			return fixtures{}, err
		}
	}
	if err := s.enrol(ctx, programID, partnerID); err != nil {
		return fixtures{}, err
	}
	if !found {
		active := true
		_, _, err := s.cfg.Catalog.CreateLink(ctx, programID, catalog.LinkInput{PartnerID: &partnerID, Code: &code, Active: &active})
		switch {
		case errors.Is(err, errkind.Conflict):
			// Created meanwhile by a concurrent call: use that one.
			if link, found, err = s.cfg.Store.FindLink(ctx, programID, code); err != nil || !found {
				return fixtures{}, fmt.Errorf("find test link after conflict (found %t): %w", found, err)
			}
		case err != nil:
			return fixtures{}, fmt.Errorf("create test link: %w", err)
		default:
			link.Active = true
		}
	}
	if !link.Active {
		if _, _, err := s.cfg.Catalog.SetLinkActive(ctx, link.ID, true); err != nil {
			return fixtures{}, fmt.Errorf("re-activate test link %d: %w", link.ID, err)
		}
	}
	if err := s.syncReplicas(ctx); err != nil {
		return fixtures{}, err
	}
	landing := "https://" + p.Domain + "/"
	return fixtures{click: TestClick{
		ProgramID:    programID,
		AffiliateURL: landing + "?via=" + code,
		PageURL:      landing,
	}}, nil
}

func (s *service) fixturePartner(ctx context.Context, programID int64) (int64, error) {
	email := FixturePartnerEmail(programID)
	id, found, err := s.cfg.Store.FindPartnerByEmail(ctx, email)
	if err != nil {
		return 0, fmt.Errorf("find test partner: %w", err)
	}
	if found {
		return id, nil
	}
	name := FixturePartnerName
	partner, _, err := s.cfg.Catalog.CreatePartner(ctx, catalog.PartnerInput{Name: &name, Email: &email})
	if err != nil {
		return 0, fmt.Errorf("create test partner: %w", err)
	}
	return partner.ID, nil
}

func (s *service) enrol(ctx context.Context, programID, partnerID int64) error {
	enrolled, err := s.cfg.Store.PartnerEnrolled(ctx, programID, partnerID)
	if err != nil {
		return fmt.Errorf("find test partner enrolment: %w", err)
	}
	if enrolled {
		return nil
	}
	approved := true
	_, _, err = s.cfg.Catalog.AddPartnerToProgram(ctx, programID, catalog.PartnerProgramInput{PartnerID: &partnerID, Approved: &approved})
	if err != nil && !errors.Is(err, errkind.Conflict) {
		return fmt.Errorf("enrol test partner %d: %w", partnerID, err)
	}
	return nil
}

// syncReplicas waits until every catalog consumer has applied everything
// committed so far: the fixtures just written, and the caller's key however
// recently it was issued.
func (s *service) syncReplicas(ctx context.Context) error {
	seq, err := s.cfg.Store.CatalogSeq(ctx)
	if err != nil {
		return fmt.Errorf("read catalog sequence: %w", err)
	}
	if err := s.cfg.Catalog.WaitForSync(ctx, seq, s.cfg.SyncTimeout); err != nil {
		// A lagging replica is our failure (500), which the transport's
		// table gives every kind it does not own, catalog ones included.
		return fmt.Errorf("wait for catalog replicas at %d: %w", seq, err)
	}
	return nil
}
