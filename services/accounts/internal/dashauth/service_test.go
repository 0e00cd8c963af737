package dashauth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/dashauth"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

func TestSafeReturnTo(t *testing.T) {
	for _, ok := range []string{"/dashboard/", "/dashboard/?program=3&period=7d", "/dashboard/a/b%20c", "/dashboard/a..b/"} {
		if got, err := dashauth.SafeReturnTo(ok); err != nil || got != ok {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "dashboard/", "//evil.example", "///evil.example", "/\\evil.example", "/%2f/evil.example",
		"/%5Cevil.example", "https://evil.example/", "javascript:alert(1)", "/dashboard/a#b", "/dashboard/a\tb", "/dashboard/a\x7f",
		"/dashboard/" + string(make([]byte, 512)), "/", "/a/b", "/dashboard", "/dashboardx/", "/dashboard/../admin/", "/dashboard/%2e%2E/admin",
		"/dashboard/..%2fadmin", "/dashboard/%5c", "/dashboard/./x", "/%64ashboard/", "/dashboard/\xff"} {
		if _, err := dashauth.SafeReturnTo(bad); !errors.Is(err, dashauth.ErrBadReturnTo) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

type memStore struct {
	sessions []dashauth.Session
}

func (m *memStore) CreateSession(_ context.Context, s dashauth.Session) error {
	s.ID = int64(len(m.sessions) + 1)
	m.sessions = append(m.sessions, s)
	return nil
}

func (m *memStore) SessionByState(_ context.Context, h []byte) (dashauth.Session, error) {
	for _, s := range m.sessions {
		if string(s.StateHash) == string(h) {
			return s, nil
		}
	}
	return dashauth.Session{}, dashauth.ErrSessionNotFound
}

func (m *memStore) ConsumeSession(_ context.Context, id int64, at time.Time) (bool, error) {
	s := &m.sessions[id-1]
	if s.ConsumedAt != nil || !at.Before(s.ExpiresAt) {
		return false, nil
	}
	s.ConsumedAt = &at
	return true, nil
}

func (m *memStore) Sweep(context.Context, time.Time) error { return nil }
func (m *memStore) UserByID(_ context.Context, id int64) (catalog.User, error) {
	if id != 7 {
		return catalog.User{}, &catalog.NotFoundError{What: "user"}
	}
	return catalog.User{ID: 7, Email: "o@b.example"}, nil
}
func (m *memStore) Memberships(context.Context, int64) ([]dashauth.Membership, error) {
	return nil, nil
}
func (m *memStore) Workspaces(context.Context, int64) ([]dashauth.Workspace, error) {
	return nil, nil
}

type identifier struct{ nonce string }

func (i *identifier) Identify(_ context.Context, _, nonce string) (catalog.User, error) {
	i.nonce = nonce
	return catalog.User{ID: 7}, nil
}

type tokens struct{}

func (tokens) IssueDashboard(int64) (string, time.Time, error) { return "tok", time.Time{}, nil }

// The sign-in lives exactly DefaultSessionTTL on the injected clock.
func TestCallbackExpiryBoundary(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  error
	}{
		{"a nanosecond before 5 minutes", dashauth.DefaultSessionTTL - time.Nanosecond, nil},
		{"at 5 minutes", dashauth.DefaultSessionTTL, dashauth.ErrSessionExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := now
			id := &identifier{}
			svc, err := dashauth.NewService(dashauth.Config{Store: &memStore{}, Tokens: tokens{}, Identifier: id,
				AuthURL: "https://idp.example/authorize", ClientID: "c", CallbackURL: "https://app.example/cb",
				DashboardPath: "/dashboard/", Now: func() time.Time { return clock }})
			if err != nil {
				t.Fatal(err)
			}
			st, err := svc.Start(context.Background(), "", "")
			if err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(tc.after)
			got, err := svc.Callback(context.Background(), st.State, "idtok", st.State)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if tc.want == nil && (got.ReturnTo != "/dashboard/" || got.Token != "tok" || id.nonce == "") {
				t.Fatalf("signed in %+v (nonce %q)", got, id.nonce)
			}
		})
	}
}

func TestMeOfAGoneUserIsUnauthenticated(t *testing.T) {
	svc, err := dashauth.NewService(dashauth.Config{Store: &memStore{}, Tokens: tokens{}, DashboardPath: "/dashboard/", Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Me(context.Background(), 8); !errors.Is(err, errkind.Unauthenticated) {
		t.Fatalf("err %v", err)
	}
	if _, err := svc.Start(context.Background(), "/dashboard/", ""); !errors.Is(err, dashauth.ErrNotConfigured) {
		t.Fatalf("start without a provider: %v", err)
	}
	var ce *identity.Error
	if _, err := svc.Callback(context.Background(), "s", "t", "s"); !errors.As(err, &ce) || ce != dashauth.ErrNotConfigured {
		t.Fatalf("callback without a provider: %v", err)
	}
}
