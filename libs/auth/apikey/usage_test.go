package apikey_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

func TestUses_OnlyWorkingKeysAreRecordedLatestFirst(t *testing.T) {
	t.Parallel()
	now := deadline.Add(-time.Hour)
	a, _ := fixture(t, now)
	a.Uses = apikey.NewUses()
	for _, h := range []string{"", "Bearer ", "Bearer svc_live_nope", "Bearer " + revokedKey, "Bearer " + validKey, "Bearer " + rotatingKey} {
		if _, _, err := a.AuthenticateHeader(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	later := now.Add(time.Minute)
	a.Now = func() time.Time { return later }
	if _, _, err := a.AuthenticateHeader(context.Background(), "Bearer "+validKey); err != nil {
		t.Fatal(err)
	}
	// A retired key is refused: not a use.
	a.Now = func() time.Time { return deadline }
	if _, _, err := a.AuthenticateHeader(context.Background(), "Bearer "+rotatingKey); err != nil {
		t.Fatal(err)
	}
	got := a.Uses.Drain()
	slices.SortFunc(got, func(x, y apikey.Use) int { return int(x.KeyID - y.KeyID) })
	want := []apikey.Use{{KeyID: 1, ProgramID: 10, At: later}, {KeyID: 3, ProgramID: 10, At: now}}
	if !slices.Equal(got, want) {
		t.Fatalf("drained %+v, want %+v", got, want)
	}
	if rest := a.Uses.Drain(); len(rest) != 0 {
		t.Fatalf("drained twice: %+v", rest)
	}
}

func TestUses_RestoreKeepsTheNewerUse(t *testing.T) {
	t.Parallel()
	u := apikey.NewUses()
	u.Record(apikey.Key{ID: 1, ProgramID: 10}, t0)
	failed := u.Drain()
	u.Record(apikey.Key{ID: 1, ProgramID: 10}, t0.Add(time.Second))
	u.Restore(failed)
	u.Restore([]apikey.Use{{KeyID: 2, ProgramID: 10, At: t0}})
	got := u.Drain()
	slices.SortFunc(got, func(x, y apikey.Use) int { return int(x.KeyID - y.KeyID) })
	if want := []apikey.Use{{KeyID: 1, ProgramID: 10, At: t0.Add(time.Second)}, {KeyID: 2, ProgramID: 10, At: t0}}; !slices.Equal(got, want) {
		t.Fatalf("%+v", got)
	}
}
