package apikeys

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// fakeCatalog holds the keys of program 1 and 2 and records the changes.
type fakeCatalog struct {
	keys    []catalog.APIKey
	rotated []int64
	revoked []int64
	waited  []catalog.Seq
}

func (c *fakeCatalog) ListKeys(_ context.Context, programID int64) ([]catalog.APIKey, error) {
	if programID != 1 && programID != 2 {
		return nil, &catalog.NotFoundError{What: "program"}
	}
	var out []catalog.APIKey
	for _, k := range c.keys {
		if k.ProgramID == programID {
			out = append(out, k)
		}
	}
	return out, nil
}

func (c *fakeCatalog) IssueKey(_ context.Context, programID int64, test bool) (catalog.IssuedKey, catalog.Seq, error) {
	k := catalog.APIKey{ID: int64(len(c.keys) + 1), ProgramID: programID, Prefix: "svc_test_abcd", Last4: "wxyz", Test: test}
	c.keys = append(c.keys, k)
	return catalog.IssuedKey{APIKey: k, Plain: "svc_test_abcd-the-rest-wxyz"}, 9, nil
}

func (c *fakeCatalog) RotateKey(_ context.Context, keyID int64, deadline time.Time) (catalog.APIKey, catalog.Seq, error) {
	c.rotated = append(c.rotated, keyID)
	k := c.keys[keyID-1]
	k.RotationMarkedAt, k.RotationDeadline = &deadline, &deadline
	return k, 10, nil
}

func (c *fakeCatalog) RevokeKey(_ context.Context, keyID int64) (catalog.APIKey, catalog.Seq, error) {
	c.revoked = append(c.revoked, keyID)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.keys[keyID-1].RevokedAt = &now
	return c.keys[keyID-1], 11, nil
}

func (c *fakeCatalog) WaitForSync(_ context.Context, seq catalog.Seq, _ time.Duration) error {
	c.waited = append(c.waited, seq)
	return catalog.ErrSyncTimeout // a lagging replica: Revoke answers anyway
}

// fakeAccess: user 1 writes program 1, user 2 reads it, nobody else.
type fakeAccess struct{}

func (fakeAccess) Authorize(_ context.Context, userID, programID int64, need identity.Permission) error {
	switch {
	case programID == 1 && userID == 1:
		return nil
	case programID == 1 && userID == 2:
		if need == identity.PermissionWrite {
			return identity.ErrReadOnly
		}
		return nil
	}
	return identity.ErrNoAccess
}

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newService(t *testing.T) (*fakeCatalog, Service) {
	t.Helper()
	revoked := now
	c := &fakeCatalog{keys: []catalog.APIKey{
		{ID: 1, ProgramID: 1, Prefix: "svc_live_AAAA", Last4: "1111"},
		{ID: 2, ProgramID: 1, Prefix: "svc_live_BBBB"}, // issued before last4 was kept
		{ID: 3, ProgramID: 2, Prefix: "svc_live_CCCC", Last4: "3333"},
		{ID: 4, ProgramID: 1, Prefix: "svc_test_DDDD", Last4: "4444", Test: true, RevokedAt: &revoked},
	}}
	svc, err := NewService(Config{Access: fakeAccess{}, Catalog: c, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return c, svc
}

func TestListIsMaskedAndLeavesRevokedKeysOut(t *testing.T) {
	t.Parallel()
	_, svc := newService(t)
	for _, user := range []int64{1, 2} {
		ks, err := svc.List(context.Background(), user, 1)
		if err != nil || len(ks) != 2 || ks[0].Masked != "svc_live_AAAA…1111" || ks[1].Masked != "svc_live_BBBB…" || ks[0].Mode != ModeLive {
			t.Fatalf("user %d: %+v %v", user, ks, err)
		}
	}
	if _, err := svc.List(context.Background(), 3, 1); !errors.Is(err, identity.ErrNoAccess) {
		t.Fatalf("non-member: %v", err)
	}
}

func TestChangesNeedWriteAndTheProgramsOwnLiveKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	later := now.Add(time.Hour)
	c, svc := newService(t)
	if _, _, err := svc.Create(ctx, 2, 1, ModeLive); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("reader create: %v", err)
	}
	if _, _, err := svc.MarkRotation(ctx, 2, 1, 1, later); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("reader rotation: %v", err)
	}
	if _, _, err := svc.Revoke(ctx, 3, 1, 1); !errors.Is(err, identity.ErrNoAccess) {
		t.Fatalf("non-member revoke: %v", err)
	}
	for _, key := range []int64{3, 4, 0, 99} { // another program's, revoked, none
		if _, _, err := svc.MarkRotation(ctx, 1, 1, key, later); !errors.Is(err, ErrKeyNotFound) || !errors.Is(err, errkind.NotFound) {
			t.Fatalf("rotation of key %d: %v", key, err)
		}
		if _, _, err := svc.Revoke(ctx, 1, 1, key); !errors.Is(err, ErrKeyNotFound) {
			t.Fatalf("revoke of key %d: %v", key, err)
		}
	}
	if _, _, err := svc.MarkRotation(ctx, 1, 1, 1, now); !errors.Is(err, errkind.Invalid) {
		t.Fatalf("a deadline now: %v", err)
	}
	if _, _, err := svc.Create(ctx, 1, 1, "prod"); !errors.Is(err, errkind.Invalid) {
		t.Fatalf("mode prod: %v", err)
	}
	if len(c.rotated)+len(c.revoked) != 0 || len(c.keys) != 4 {
		t.Fatalf("refusals changed something: %+v", c)
	}
	k, seq, err := svc.MarkRotation(ctx, 1, 1, 1, later)
	if err != nil || seq != 10 || k.RotationDeadline == nil || !k.RotationDeadline.Equal(later) {
		t.Fatalf("rotation: %+v %d %v", k, seq, err)
	}
	at, seq, err := svc.Revoke(ctx, 1, 1, 1)
	if err != nil || seq != 11 || !at.Equal(now) || len(c.waited) != 1 || c.waited[0] != 11 {
		t.Fatalf("revoke: %v %d %v waited %v", at, seq, err, c.waited)
	}
	issued, _, err := svc.Create(ctx, 1, 1, ModeTest)
	if err != nil || issued.Plain == "" || issued.Mode != ModeTest || issued.Masked != "svc_test_abcd…wxyz" {
		t.Fatalf("create: %+v %v", issued, err)
	}
}
