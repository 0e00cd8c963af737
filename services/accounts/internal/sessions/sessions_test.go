package sessions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

type fakeCatalog struct {
	revoked []catalog.SessionRevocation
	waited  []catalog.Seq
	waitErr error
}

func (f *fakeCatalog) RevokeSession(_ context.Context, r catalog.SessionRevocation) (catalog.Seq, error) {
	for _, x := range f.revoked {
		if x.SessionID == r.SessionID {
			return 0, nil
		}
	}
	f.revoked = append(f.revoked, r)
	return catalog.Seq(len(f.revoked)), nil
}

func (f *fakeCatalog) SessionRevoked(_ context.Context, id string) (bool, error) {
	for _, x := range f.revoked {
		if x.SessionID == id {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeCatalog) WaitForSync(_ context.Context, seq catalog.Seq, _ time.Duration) error {
	f.waited = append(f.waited, seq)
	return f.waitErr
}

// tokens accepts "dash-<id>" as a dashboard session of user 7.
type tokens struct{}

func (tokens) VerifyKind(token, kind string) (session.Claims, error) {
	if kind != session.KindDashboard || len(token) < 6 || token[:5] != "dash-" {
		return session.Claims{}, session.ErrInvalidToken
	}
	return session.Claims{UserID: 7, Kind: kind, ID: token[5:], ExpiresAt: time.Unix(2_000_000_000, 0)}, nil
}

func TestSignOut(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	cat := &fakeCatalog{}
	svc, err := NewService(Config{Catalog: cat, Tokens: tokens{}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("a token that opens nothing writes nothing", func(t *testing.T) {
		for _, tok := range []string{"", "garbage", "cli-x"} {
			if out, err := svc.SignOut(ctx, tok); err != nil || out.Revoked {
				t.Fatalf("%q: %+v %v", tok, out, err)
			}
		}
		if len(cat.revoked) != 0 || len(cat.waited) != 0 {
			t.Fatalf("revoked %v, waited %v", cat.revoked, cat.waited)
		}
	})

	t.Run("a session is revoked once, and the sign-out waits for the replicas", func(t *testing.T) {
		out, err := svc.SignOut(ctx, "dash-a")
		if err != nil || !out.Revoked || out.Lag != nil {
			t.Fatalf("%+v %v", out, err)
		}
		want := catalog.SessionRevocation{SessionID: "a", UserID: 7, ExpiresAt: time.Unix(2_000_000_000, 0), RevokedAt: now.UTC()}
		if len(cat.revoked) != 1 || cat.revoked[0] != want || len(cat.waited) != 1 || cat.waited[0] != 1 {
			t.Fatalf("revoked %+v, waited %v", cat.revoked, cat.waited)
		}
		if revoked, _ := svc.Revoked(ctx, session.Claims{ID: "a"}); !revoked {
			t.Fatal("the signed-out session still stands")
		}
		if revoked, _ := svc.Revoked(ctx, session.Claims{ID: "b"}); revoked {
			t.Fatal("another session was revoked")
		}
		// Again: nothing new to publish, nothing to wait for.
		if out, err := svc.SignOut(ctx, "dash-a"); err != nil || !out.Revoked || len(cat.revoked) != 1 || len(cat.waited) != 1 {
			t.Fatalf("second sign-out: %+v %v, revoked %d, waited %d", out, err, len(cat.revoked), len(cat.waited))
		}
	})

	t.Run("a replica that lags past the wait does not fail the sign-out", func(t *testing.T) {
		cat.waitErr = catalog.ErrSyncTimeout
		out, err := svc.SignOut(ctx, "dash-c")
		if err != nil || !out.Revoked || !errors.Is(out.Lag, catalog.ErrSyncTimeout) {
			t.Fatalf("%+v %v", out, err)
		}
	})
}
