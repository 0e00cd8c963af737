package catalog

import (
	"context"
	"fmt"
	"time"
)

// Service is the catalog's use cases, as the admin API (and later the CLI
// routes) call them.
type Service interface {
	CreateAdvertiser(ctx context.Context, in AdvertiserInput) (Advertiser, Seq, error)
	CreateUser(ctx context.Context, in UserInput) (User, Seq, error)
	CreateProgram(ctx context.Context, in ProgramInput) (Program, Seq, error)
	UpdateProgram(ctx context.Context, id int64, in ProgramInput) (Program, Seq, error)
	GetProgram(ctx context.Context, id int64) (Program, error)
	// GetPrograms reads the programs of ids that exist, ordered by id.
	GetPrograms(ctx context.Context, ids []int64) ([]Program, error)
	// FindUserByEmail, ListPrograms, FindPartnersByEmail and ListLinks let
	// an admin client find what exists before creating what is missing.
	FindUserByEmail(ctx context.Context, email *string) (User, error)
	ListPrograms(ctx context.Context, advertiserID *int64) ([]Program, error)
	FindPartnersByEmail(ctx context.Context, email *string) ([]Partner, error)
	ListLinks(ctx context.Context, programID int64, code *string) ([]Link, error)
	PutMember(ctx context.Context, programID int64, in MemberInput) (Membership, Seq, error)
	IssueKey(ctx context.Context, programID int64, test bool) (IssuedKey, Seq, error)
	// ImportKey stores an existing key value (fixed demo keys, keys moved
	// from another system) as IssueKey stores a generated one. test, when
	// not nil, must agree with the key's kind.
	ImportKey(ctx context.Context, programID int64, plain string, test *bool) (IssuedKey, Seq, error)
	ListKeys(ctx context.Context, programID int64) ([]APIKey, error)
	RotateKey(ctx context.Context, keyID int64, deadline time.Time) (APIKey, Seq, error)
	// RevokeKey revokes a key at once: its event tells every replica to
	// refuse it. Revoking a revoked key keeps the first revocation time.
	RevokeKey(ctx context.Context, keyID int64) (APIKey, Seq, error)
	CreatePartner(ctx context.Context, in PartnerInput) (Partner, Seq, error)
	AddPartnerToProgram(ctx context.Context, programID int64, in PartnerProgramInput) (PartnerProgram, Seq, error)
	CreateLink(ctx context.Context, programID int64, in LinkInput) (Link, Seq, error)
	SetLinkActive(ctx context.Context, linkID int64, active bool) (Link, Seq, error)
	IssueSession(ctx context.Context, userID int64) (Session, error)
	// SetUserBlocked suspends (true) or restores (false) a user. The user's
	// event carries the flag to every service, so a suspended user's
	// sessions are refused everywhere, not only by accounts.
	SetUserBlocked(ctx context.Context, userID int64, blocked bool) (User, Seq, error)
	// RevokeSession ends a dashboard session before its expiry (sign-out);
	// Seq 0 when it was already ended.
	RevokeSession(ctx context.Context, r SessionRevocation) (Seq, error)
	// SessionRevoked reports whether a session was ended (its id, the
	// token's jti).
	SessionRevoked(ctx context.Context, sessionID string) (bool, error)
	// WaitForSync returns nil once every consumer has applied the catalog up
	// to seq, and ErrSyncTimeout when timeout passes first.
	WaitForSync(ctx context.Context, seq Seq, timeout time.Duration) error
}

// IssuedKey is a new program API key; Plain is shown to the caller once and
// never stored.
type IssuedKey struct {
	APIKey
	Plain string
}

type Session struct {
	Token     string
	ExpiresAt time.Time
}

// KeyGenerator makes a new program API key: the plain value, its hash and the
// prefix kept for masked display.
type KeyGenerator func(test bool) (plain string, hash []byte, prefix string, err error)

// KeyImporter checks an existing key value and returns what IssueKey's
// generator returns for a new one, minus the plain value: its hash, the
// prefix kept for masked display, and whether it is a test key. A value
// without the generated keys' shape is an error.
type KeyImporter func(plain string) (hash []byte, prefix string, test bool, err error)

// SessionIssuer signs dashboard session tokens that other services verify
// with the public key alone.
type SessionIssuer interface {
	Issue(userID int64, kind string) (token string, expiresAt time.Time, err error)
}

// Config wires a service.
type Config struct {
	Store     Store
	Keys      KeyGenerator
	Import    KeyImporter
	Sessions  SessionIssuer
	Now       func() time.Time
	Consumers []string      // services the sync barrier waits for
	SyncPoll  time.Duration // how often the barrier re-reads consumer progress
	// Stopping, when closed, ends sync barrier waits with ErrShuttingDown
	// (platform.Platform.Stopping). Nil: waits end only by themselves.
	Stopping <-chan struct{}
}

type service struct {
	cfg Config
}

// NewService validates the wiring and returns the catalog service.
func NewService(cfg Config) (Service, error) {
	if cfg.Store == nil || cfg.Keys == nil || cfg.Import == nil || cfg.Sessions == nil || cfg.Now == nil {
		return nil, fmt.Errorf("catalog: store, key generator, key importer, session issuer and clock are required")
	}
	if cfg.SyncPoll <= 0 {
		cfg.SyncPoll = 20 * time.Millisecond
	}
	return &service{cfg: cfg}, nil
}

func (s *service) CreateAdvertiser(ctx context.Context, in AdvertiserInput) (Advertiser, Seq, error) {
	a, err := in.validate()
	if err != nil {
		return Advertiser{}, 0, err
	}
	return s.cfg.Store.CreateAdvertiser(ctx, a)
}

func (s *service) CreateUser(ctx context.Context, in UserInput) (User, Seq, error) {
	u, err := in.validate()
	if err != nil {
		return User{}, 0, err
	}
	return s.cfg.Store.CreateUser(ctx, u)
}

func (s *service) CreateProgram(ctx context.Context, in ProgramInput) (Program, Seq, error) {
	p, err := NewProgram(in)
	if err != nil {
		return Program{}, 0, err
	}
	return s.cfg.Store.CreateProgram(ctx, p)
}

// NewProgram is a new program with the defaults and in applied, validated
// in the order and with the messages of CreateProgram (the admin API's and
// init's); nothing is stored.
func NewProgram(in ProgramInput) (Program, error) {
	p := Program{
		AttributionWindowDays: DefaultAttributionWindowDays,
		HoldDays:              DefaultHoldDays,
		DurationMonths:        DefaultDurationMonths,
		LeadAuthPolicy:        LeadAuthServerRequired,
		PaymentTrackingMode:   PaymentProcessorConnect,
		Processor:             ProcessorConnection{Status: ProcessorNotConnected},
		AllowedOrigins:        []string{},
		Currency:              DefaultCurrency,
		LeadCommission:        DefaultLeadCommission,
	}
	if err := in.validateFields(true); err != nil {
		return Program{}, err
	}
	if err := in.apply(&p); err != nil {
		return Program{}, err
	}
	return p, nil
}

func (s *service) UpdateProgram(ctx context.Context, id int64, in ProgramInput) (Program, Seq, error) {
	if in.AdvertiserID != nil {
		return Program{}, 0, invalid("advertiser_id", "advertiser_id cannot be changed")
	}
	// Field checks run before the store is touched so bad input never opens
	// a write; the checks that depend on the stored program run inside it.
	if err := in.validateFields(false); err != nil {
		return Program{}, 0, err
	}
	return s.cfg.Store.UpdateProgram(ctx, id, in.apply)
}

func (s *service) GetProgram(ctx context.Context, id int64) (Program, error) {
	return s.cfg.Store.GetProgram(ctx, id)
}

func (s *service) GetPrograms(ctx context.Context, ids []int64) ([]Program, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.cfg.Store.GetPrograms(ctx, ids)
}

func (s *service) FindUserByEmail(ctx context.Context, email *string) (User, error) {
	e, err := requiredEmail("email", email)
	if err != nil {
		return User{}, err
	}
	return s.cfg.Store.FindUserByEmail(ctx, e)
}

func (s *service) ListPrograms(ctx context.Context, advertiserID *int64) ([]Program, error) {
	id, err := requiredID("advertiser_id", advertiserID)
	if err != nil {
		return nil, err
	}
	return s.cfg.Store.ListPrograms(ctx, id)
}

func (s *service) FindPartnersByEmail(ctx context.Context, email *string) ([]Partner, error) {
	e, err := requiredEmail("email", email)
	if err != nil {
		return nil, err
	}
	return s.cfg.Store.FindPartnersByEmail(ctx, e)
}

func (s *service) ListLinks(ctx context.Context, programID int64, code *string) ([]Link, error) {
	if code != nil && !linkCodeRe.MatchString(*code) {
		return nil, invalid("code", msgLinkCode)
	}
	return s.cfg.Store.ListLinks(ctx, programID, code)
}

func (s *service) ListKeys(ctx context.Context, programID int64) ([]APIKey, error) {
	return s.cfg.Store.ListAPIKeys(ctx, programID)
}

func (s *service) PutMember(ctx context.Context, programID int64, in MemberInput) (Membership, Seq, error) {
	m, err := in.validate(programID)
	if err != nil {
		return Membership{}, 0, err
	}
	return s.cfg.Store.UpsertMembership(ctx, m)
}

func (s *service) IssueKey(ctx context.Context, programID int64, test bool) (IssuedKey, Seq, error) {
	plain, hash, prefix, err := s.cfg.Keys(test)
	if err != nil {
		return IssuedKey{}, 0, fmt.Errorf("generate api key: %w", err)
	}
	return s.storeKey(ctx, programID, plain, hash, prefix, test)
}

// Messages of an imported key that is refused. They never repeat the key:
// business errors reach traces and logs.
const (
	MsgKeyFormat   = "key must be a program API key: svc_live_ or svc_test_ followed by 43 letters or digits"
	MsgKeyTestKind = "key is a live key (svc_live_) but test is true"
	MsgKeyLiveKind = "key is a test key (svc_test_) but test is false"
)

func (s *service) ImportKey(ctx context.Context, programID int64, plain string, test *bool) (IssuedKey, Seq, error) {
	hash, prefix, isTest, err := s.cfg.Import(plain)
	if err != nil {
		// The importer's error is only ever about the key's shape.
		return IssuedKey{}, 0, invalid("key", MsgKeyFormat)
	}
	if test != nil && *test != isTest {
		if *test {
			return IssuedKey{}, 0, invalid("key", MsgKeyTestKind)
		}
		return IssuedKey{}, 0, invalid("key", MsgKeyLiveKind)
	}
	return s.storeKey(ctx, programID, plain, hash, prefix, isTest)
}

// storeKey is the one path by which a key, generated or imported, is stored
// and its catalog event written.
func (s *service) storeKey(ctx context.Context, programID int64, plain string, hash []byte, prefix string, test bool) (IssuedKey, Seq, error) {
	k, seq, err := s.cfg.Store.CreateAPIKey(ctx, APIKey{ProgramID: programID, Hash: hash, Prefix: prefix, Last4: lastFour(plain), Test: test})
	if err != nil {
		return IssuedKey{}, 0, err
	}
	return IssuedKey{APIKey: k, Plain: plain}, seq, nil
}

// lastFour is what masked display keeps of a key besides its prefix.
func lastFour(plain string) string {
	if len(plain) < 4 {
		return ""
	}
	return plain[len(plain)-4:]
}

func (s *service) RevokeKey(ctx context.Context, keyID int64) (APIKey, Seq, error) {
	now := s.cfg.Now().UTC()
	return s.cfg.Store.UpdateAPIKey(ctx, keyID, func(k *APIKey) error {
		if k.RevokedAt == nil {
			k.RevokedAt = &now
		}
		return nil
	})
}

func (s *service) RotateKey(ctx context.Context, keyID int64, deadline time.Time) (APIKey, Seq, error) {
	now := s.cfg.Now().UTC()
	return s.cfg.Store.UpdateAPIKey(ctx, keyID, func(k *APIKey) error {
		// Re-marking keeps the first marking time: Deprecation tells clients
		// when they were first warned.
		if k.RotationMarkedAt == nil {
			k.RotationMarkedAt = &now
		}
		d := deadline.UTC()
		k.RotationDeadline = &d
		return nil
	})
}

func (s *service) CreatePartner(ctx context.Context, in PartnerInput) (Partner, Seq, error) {
	p, err := in.validate()
	if err != nil {
		return Partner{}, 0, err
	}
	return s.cfg.Store.CreatePartner(ctx, p)
}

func (s *service) AddPartnerToProgram(ctx context.Context, programID int64, in PartnerProgramInput) (PartnerProgram, Seq, error) {
	pp, err := in.validate(programID)
	if err != nil {
		return PartnerProgram{}, 0, err
	}
	return s.cfg.Store.CreatePartnerProgram(ctx, pp)
}

func (s *service) CreateLink(ctx context.Context, programID int64, in LinkInput) (Link, Seq, error) {
	l, err := in.validate(programID)
	if err != nil {
		return Link{}, 0, err
	}
	return s.cfg.Store.CreateLink(ctx, l)
}

func (s *service) SetLinkActive(ctx context.Context, linkID int64, active bool) (Link, Seq, error) {
	return s.cfg.Store.UpdateLink(ctx, linkID, func(l *Link) error {
		l.Active = active
		return nil
	})
}

func (s *service) IssueSession(ctx context.Context, userID int64) (Session, error) {
	if userID <= 0 {
		return Session{}, invalid("user_id", "user_id must be a positive integer")
	}
	u, err := s.cfg.Store.GetUser(ctx, userID)
	if err != nil {
		return Session{}, err
	}
	if u.Blocked {
		return Session{}, invalid("user_id", fmt.Sprintf("user %d is blocked", userID))
	}
	tok, exp, err := s.cfg.Sessions.Issue(u.ID, "dashboard")
	if err != nil {
		return Session{}, fmt.Errorf("issue session: %w", err)
	}
	return Session{Token: tok, ExpiresAt: exp}, nil
}

func (s *service) SetUserBlocked(ctx context.Context, userID int64, blocked bool) (User, Seq, error) {
	return s.cfg.Store.UpdateUser(ctx, userID, func(u *User) error {
		u.Blocked = blocked
		return nil
	})
}

func (s *service) RevokeSession(ctx context.Context, r SessionRevocation) (Seq, error) {
	if r.SessionID == "" || r.UserID <= 0 {
		return 0, fmt.Errorf("revoke session: id %q of user %d is not a session", r.SessionID, r.UserID)
	}
	return s.cfg.Store.RevokeSession(ctx, r)
}

func (s *service) SessionRevoked(ctx context.Context, sessionID string) (bool, error) {
	return s.cfg.Store.SessionRevoked(ctx, sessionID)
}

func (s *service) WaitForSync(ctx context.Context, seq Seq, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(s.cfg.SyncPoll)
	defer t.Stop()
	for {
		applied, err := s.cfg.Store.AppliedSeqs(ctx)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("read consumer progress: %w", err)
		}
		if err == nil && allReached(applied, s.cfg.Consumers, seq) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("catalog sequence %d not applied by every consumer within %s: %w", seq, timeout, ErrSyncTimeout)
		case <-s.cfg.Stopping:
			return fmt.Errorf("catalog sequence %d: %w", seq, ErrShuttingDown)
		case <-t.C:
		}
	}
}

func allReached(applied map[string]Seq, consumers []string, seq Seq) bool {
	for _, c := range consumers {
		if applied[c] < seq {
			return false
		}
	}
	return true
}
