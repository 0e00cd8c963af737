package cliauth

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// memStore is an in-memory Store for the service's time rules.
type memStore struct {
	mu       sync.Mutex
	sessions []Session
	tokens   []LoginToken
	users    []catalog.User
	// identities binds issuer+" "+subject to a user id.
	identities map[string]int64
}

func (m *memStore) CreateSession(_ context.Context, s Session) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.ID = int64(len(m.sessions) + 1)
	m.sessions = append(m.sessions, s)
	return s, nil
}

func (m *memStore) SessionByState(_ context.Context, h []byte) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.sessions {
		if bytes.Equal(s.StateHash, h) {
			return s, nil
		}
	}
	return Session{}, ErrSessionNotFound
}

func (m *memStore) LinkSession(_ context.Context, id, uid int64, at time.Time, confirmHash []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.sessions[id-1]
	if s.UserID != 0 || s.ConsumedAt != nil || !at.Before(s.ExpiresAt) {
		return false, nil
	}
	s.UserID, s.SignedInAt, s.ConfirmHash = uid, &at, confirmHash
	return true, nil
}

func (m *memStore) SessionByConfirm(_ context.Context, h []byte) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.sessions {
		if s.ConfirmHash != nil && bytes.Equal(s.ConfirmHash, h) {
			return s, nil
		}
	}
	return Session{}, ErrConfirmNotFound
}

func (m *memStore) ConfirmSession(_ context.Context, id int64, at time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.sessions[id-1]
	if s.UserID == 0 || s.ConfirmedAt != nil || s.ConsumedAt != nil {
		return false, nil
	}
	s.ConfirmedAt = &at
	return true, nil
}

func (m *memStore) ConsumeSession(_ context.Context, id int64, at time.Time, tok LoginToken) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.sessions[id-1]
	if s.UserID == 0 || s.ConfirmedAt == nil || s.ConsumedAt != nil {
		return false, nil
	}
	s.ConsumedAt = &at
	m.tokens = append(m.tokens, tok)
	return true, nil
}

func (m *memStore) UserByEmail(_ context.Context, email string) (catalog.User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range m.users {
		if strings.EqualFold(u.Email, email) {
			return u, nil
		}
	}
	return catalog.User{}, &catalog.NotFoundError{What: "user"}
}

func (m *memStore) UserByID(_ context.Context, id int64) (catalog.User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range m.users {
		if u.ID == id {
			return u, nil
		}
	}
	return catalog.User{}, &catalog.NotFoundError{What: "user"}
}

func (m *memStore) UserByToken(ctx context.Context, h []byte, now time.Time) (catalog.User, error) {
	m.mu.Lock()
	var uid int64
	for _, t := range m.tokens {
		if bytes.Equal(t.Hash, h) && now.Before(t.ExpiresAt) {
			uid = t.UserID
		}
	}
	m.mu.Unlock()
	if uid == 0 {
		return catalog.User{}, ErrTokenInvalid
	}
	return m.UserByID(ctx, uid)
}

func (m *memStore) UserByIdentity(ctx context.Context, issuer, subject string) (catalog.User, error) {
	m.mu.Lock()
	id, ok := m.identities[issuer+" "+subject]
	m.mu.Unlock()
	if !ok {
		return catalog.User{}, &catalog.NotFoundError{What: "user"}
	}
	return m.UserByID(ctx, id)
}

func (m *memStore) BindIdentity(_ context.Context, userID int64, issuer, subject string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.identities == nil {
		m.identities = map[string]int64{}
	}
	for k, id := range m.identities {
		if id == userID {
			return k == issuer+" "+subject, nil
		}
	}
	if _, taken := m.identities[issuer+" "+subject]; taken {
		return false, nil
	}
	m.identities[issuer+" "+subject] = userID
	return true, nil
}

func (m *memStore) ProgramIDsByAdvertiser(context.Context, int64) ([]int64, error) { return nil, nil }
func (m *memStore) Sweep(context.Context, time.Time) error                         { return nil }

// fakeCatalog creates users in the memStore; nothing else is called here.
type fakeCatalog struct {
	catalog.Service
	store *memStore
}

func (f fakeCatalog) CreateUser(_ context.Context, in catalog.UserInput) (catalog.User, catalog.Seq, error) {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	u := catalog.User{ID: int64(len(f.store.users) + 1), Email: strings.ToLower(*in.Email)}
	f.store.users = append(f.store.users, u)
	return u, 1, nil
}

// fakeVerifier accepts "ok:<email>:<nonce>"; the subject is derived from
// the email.
type fakeVerifier struct{}

func (fakeVerifier) Verify(_ context.Context, raw string) (Identity, error) {
	parts := strings.Split(raw, ":")
	if len(parts) != 3 || parts[0] != "ok" {
		return Identity{}, errkind.Unauthenticated
	}
	return Identity{Issuer: "https://id.example", Subject: "sub-" + strings.ToLower(parts[1]), Email: parts[1], EmailVerified: true, Nonce: parts[2]}, nil
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestService(t *testing.T) (Service, *clock) {
	t.Helper()
	st := &memStore{}
	clk := &clock{t: time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)}
	svc, err := NewService(Config{Store: st, Catalog: fakeCatalog{store: st}, Verifier: fakeVerifier{},
		AuthURL: "https://id.example/authorize?prompt=login", ClientID: "svc-cli", Now: clk.Now, TokenTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return svc, clk
}

func start(t *testing.T, svc Service) (state, nonce string) {
	t.Helper()
	s, err := svc.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(s.URL)
	if u.Query().Get("prompt") != "login" {
		t.Fatalf("the provider's own query was dropped: %s", s.URL)
	}
	return s.State, u.Query().Get("nonce")
}

func TestCallbackSessionLifetimeBoundary(t *testing.T) {
	cases := []struct {
		name  string
		after time.Duration
		want  error
	}{
		{"just inside 5 minutes", 5*time.Minute - time.Nanosecond, nil},
		{"at 5 minutes", 5 * time.Minute, ErrSessionExpired},
		{"after 5 minutes", 6 * time.Minute, ErrSessionExpired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc, clk := newTestService(t)
			state, nonce := start(t, svc)
			clk.Add(c.after)
			_, err := svc.Callback(context.Background(), state, "ok:a@b.example:"+nonce)
			if !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestPollStatusesOverTime(t *testing.T) {
	ctx := context.Background()
	t.Run("pending, then expired at 5 minutes", func(t *testing.T) {
		svc, clk := newTestService(t)
		state, _ := start(t, svc)
		clk.Add(5*time.Minute - time.Nanosecond)
		if p, err := svc.Poll(ctx, state); err != nil || p.Status != StatusPending {
			t.Fatalf("%+v %v", p, err)
		}
		clk.Add(time.Nanosecond)
		if p, err := svc.Poll(ctx, state); err != nil || p.Status != StatusExpired {
			t.Fatalf("%+v %v", p, err)
		}
	})
	t.Run("signed in at 4:59, confirmed 4:59 later, is collectable for 5 more minutes, once", func(t *testing.T) {
		svc, clk := newTestService(t)
		state, nonce := start(t, svc)
		clk.Add(4*time.Minute + 59*time.Second)
		in, err := svc.Callback(ctx, state, "ok:a@b.example:"+nonce)
		if err != nil {
			t.Fatal(err)
		}
		clk.Add(4*time.Minute + 59*time.Second)
		if p, err := svc.Poll(ctx, state); err != nil || p.Status != StatusPending || p.Token != "" {
			t.Fatalf("before confirmation: %+v %v", p, err)
		}
		if _, err := svc.Confirm(ctx, in.ConfirmToken); err != nil {
			t.Fatal(err)
		}
		clk.Add(5*time.Minute - time.Second)
		p, err := svc.Poll(ctx, state)
		if err != nil || p.Status != StatusComplete || !strings.HasPrefix(p.Token, LoginTokenPrefix) || !p.TokenExpiresAt.Equal(clk.Now().Add(time.Hour)) {
			t.Fatalf("%+v %v", p, err)
		}
		if _, err := svc.Poll(ctx, state); !errors.Is(err, ErrSessionConsumed) {
			t.Fatalf("second poll: %v", err)
		}
		u, err := svc.Authenticate(ctx, p.Token)
		if err != nil || u.Email != "a@b.example" {
			t.Fatalf("authenticate: %+v %v", u, err)
		}
		clk.Add(time.Hour - time.Nanosecond)
		if _, err := svc.Authenticate(ctx, p.Token); err != nil {
			t.Fatalf("just before expiry: %v", err)
		}
		clk.Add(time.Nanosecond)
		if _, err := svc.Authenticate(ctx, p.Token); !errors.Is(err, ErrTokenInvalid) {
			t.Fatalf("at expiry: %v", err)
		}
	})
	t.Run("confirmed but not collected within 5 minutes", func(t *testing.T) {
		svc, clk := newTestService(t)
		state, nonce := start(t, svc)
		in, err := svc.Callback(ctx, state, "ok:a@b.example:"+nonce)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Confirm(ctx, in.ConfirmToken); err != nil {
			t.Fatal(err)
		}
		clk.Add(5 * time.Minute)
		if p, err := svc.Poll(ctx, state); err != nil || p.Status != StatusExpired {
			t.Fatalf("%+v %v", p, err)
		}
	})
	t.Run("signed in, never confirmed: pending, then expired at 5 minutes; too late to confirm", func(t *testing.T) {
		svc, clk := newTestService(t)
		state, nonce := start(t, svc)
		in, err := svc.Callback(ctx, state, "ok:a@b.example:"+nonce)
		if err != nil {
			t.Fatal(err)
		}
		clk.Add(5*time.Minute - time.Nanosecond)
		if p, err := svc.Poll(ctx, state); err != nil || p.Status != StatusPending {
			t.Fatalf("%+v %v", p, err)
		}
		clk.Add(time.Nanosecond)
		if p, err := svc.Poll(ctx, state); err != nil || p.Status != StatusExpired {
			t.Fatalf("%+v %v", p, err)
		}
		if _, err := svc.Confirm(ctx, in.ConfirmToken); !errors.Is(err, ErrConfirmExpired) {
			t.Fatalf("late confirmation: %v", err)
		}
	})
}

func TestConfirm(t *testing.T) {
	ctx := context.Background()
	svc, _ := newTestService(t)
	st, err := svc.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(st.URL)
	in, err := svc.Callback(ctx, st.State, "ok:c@b.example:"+u.Query().Get("nonce"))
	if err != nil {
		t.Fatal(err)
	}
	if in.UserCode != st.UserCode || in.ConfirmToken == "" || in.ConfirmToken == st.State {
		t.Fatalf("start %+v, callback %+v", st, in)
	}
	for tok, want := range map[string]error{"": ErrMissingConfirmToken, st.State: ErrConfirmNotFound, strings.Repeat("a", 129): ErrConfirmNotFound} {
		if _, err := svc.Confirm(ctx, tok); !errors.Is(err, want) {
			t.Errorf("confirm %q: %v, want %v", tok, err, want)
		}
	}
	c, err := svc.Confirm(ctx, in.ConfirmToken)
	if err != nil || c.User.Email != "c@b.example" || c.UserCode != st.UserCode {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := svc.Confirm(ctx, in.ConfirmToken); !errors.Is(err, ErrConfirmNotFound) {
		t.Fatalf("second confirmation: %v", err)
	}
}

func TestNewUserCode(t *testing.T) {
	seen := map[string]bool{}
	shape := regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`)
	for i := 0; i < 2000; i++ {
		c, err := NewUserCode()
		if err != nil || !shape.MatchString(c) {
			t.Fatalf("%q %v", c, err)
		}
		seen[c] = true
	}
	if len(seen) < 1990 {
		t.Fatalf("only %d distinct codes in 2000", len(seen))
	}
}

func TestSameAdvertiser(t *testing.T) {
	cases := []struct {
		raw  string
		want bool
	}{
		{"42", true}, {"42.0", true}, {"4.2e1", true}, {`"42"`, true},
		{"43", false}, {"42.5", false}, {`"042"`, false}, {`" 42"`, false}, {`"abc"`, false},
		{"true", false}, {"[42]", false}, {"-42", false}, {`"`, false}, {"0x2a", false},
	}
	for _, c := range cases {
		if got := sameAdvertiser(c.raw, 42); got != c.want {
			t.Errorf("sameAdvertiser(%s) = %v, want %v", c.raw, got, c.want)
		}
	}
}

func TestAuthenticateRefusesWithoutLookup(t *testing.T) {
	svc, _ := newTestService(t)
	for _, tok := range []string{"", "svc_live_abc", "svc_cli_" + strings.Repeat("a", 200)} {
		if _, err := svc.Authenticate(context.Background(), tok); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("%q: %v", tok, err)
		}
	}
}
