package session_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/session"
)

type revocations map[string]bool

func (r revocations) Revoked(_ context.Context, c session.Claims) (bool, error) {
	if r == nil {
		return false, errors.New("store down")
	}
	return r[c.ID], nil
}

func TestChecker(t *testing.T) {
	t.Parallel()
	priv, pub := keys(t)
	now := t0
	iss, err := session.NewIssuer(priv, issuer, time.Hour, clockAt(&now))
	if err != nil {
		t.Fatal(err)
	}
	v, err := session.NewVerifier(pub, issuer, clockAt(&now))
	if err != nil {
		t.Fatal(err)
	}
	live, _, _ := iss.Issue(7, session.KindDashboard)
	gone, _, _ := iss.Issue(7, session.KindDashboard)
	goneClaims, _ := v.Verify(gone)
	cli, _, _ := iss.Issue(7, session.KindCLI)
	c, err := session.NewChecker(v, session.KindDashboard, revocations{goneClaims.ID: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Check(context.Background(), live); err != nil || got.UserID != 7 {
		t.Fatalf("live session: %+v %v", got, err)
	}
	if _, err := c.Check(context.Background(), gone); !errors.Is(err, session.ErrRevoked) || !errors.Is(err, session.ErrInvalidToken) {
		t.Fatalf("revoked session: %v, want ErrRevoked and ErrInvalidToken", err)
	}
	if _, err := c.Verify(gone); err != nil {
		t.Fatalf("Verify skips the revocation lookup: %v", err)
	}
	if _, err := c.Check(context.Background(), cli); !errors.Is(err, session.ErrInvalidToken) {
		t.Fatalf("cli token on a dashboard checker: %v", err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := c.Check(context.Background(), live); !errors.Is(err, session.ErrExpired) {
		t.Fatalf("expired session: %v", err)
	}
	now = t0
	down, _ := session.NewChecker(v, session.KindDashboard, revocations(nil))
	if _, err := down.Check(context.Background(), live); err == nil || errors.Is(err, session.ErrInvalidToken) {
		t.Fatalf("a failed lookup is an error that is not a refusal: %v", err)
	}
	if _, err := session.NewChecker(v, "other", revocations{}); err == nil {
		t.Fatal("unknown kind accepted")
	}
}
