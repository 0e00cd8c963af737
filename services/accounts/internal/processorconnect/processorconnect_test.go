package processorconnect_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	"github.com/svc-dev/svc/services/accounts/internal/processorconnect"
)

type access struct{ writers map[[2]int64]bool }

func (a access) Authorize(_ context.Context, userID, programID int64, _ identity.Permission) error {
	if a.writers[[2]int64{userID, programID}] {
		return nil
	}
	return identity.ErrReadOnly
}

type stored struct {
	st      processorconnect.State
	expires time.Time
	used    bool
}

type store struct{ states map[string]*stored }

func (s *store) SaveState(_ context.Context, hash []byte, st processorconnect.State, expires time.Time) error {
	s.states[string(hash)] = &stored{st: st, expires: expires}
	return nil
}

func (s *store) TakeState(_ context.Context, hash []byte, now time.Time) (processorconnect.State, bool, error) {
	r, ok := s.states[string(hash)]
	if !ok || r.used || !now.Before(r.expires) {
		return processorconnect.State{}, false, nil
	}
	r.used = true
	return r.st, true, nil
}

type cat struct{ updates []catalog.ProgramInput }

func (c *cat) UpdateProgram(_ context.Context, id int64, in catalog.ProgramInput) (catalog.Program, catalog.Seq, error) {
	c.updates = append(c.updates, in)
	return catalog.Program{ID: id}, catalog.Seq(len(c.updates)), nil
}

func (c *cat) WaitForSync(context.Context, catalog.Seq, time.Duration) error { return nil }

type proc struct{ fail bool }

func (p proc) AuthorizeURL(state string) string {
	return "https://processor.test/oauth/authorize?state=" + url.QueryEscape(state)
}
func (p proc) Exchange(_ context.Context, code string) (string, error) {
	if p.fail || code != "good" {
		return "", errors.New("processor answered 400")
	}
	return "acct_1", nil
}
func (p proc) Account(_ context.Context, id string) (processorconnect.Account, error) {
	return processorconnect.Account{ID: id, ChargesEnabled: true}, nil
}

func TestCallback(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	setup := func(p processorconnect.Processor) (processorconnect.Service, *store, *cat, *time.Time) {
		clock := now
		st, c := &store{states: map[string]*stored{}}, &cat{}
		svc, err := processorconnect.NewService(processorconnect.Config{Access: access{writers: map[[2]int64]bool{{7, 1}: true}},
			Store: st, Catalog: c, Processor: p, Now: func() time.Time { return clock }, StateTTL: 10 * time.Minute,
			Random: func(b []byte) error { copy(b, bytes.Repeat([]byte{9}, len(b))); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return svc, st, c, &clock
	}
	state := func(t *testing.T, svc processorconnect.Service) string {
		u, err := svc.Connect(context.Background(), 7, 1)
		if err != nil {
			t.Fatal(err)
		}
		pu, _ := url.Parse(u)
		return pu.Query().Get("state")
	}

	t.Run("the state is stored as its hash, bound to program and person, and used once", func(t *testing.T) {
		svc, st, c, _ := setup(proc{})
		s := state(t, svc)
		if _, ok := st.states[string(processorconnect.HashState(s))]; !ok || st.states[s] != nil {
			t.Fatal("not stored by hash")
		}
		p, _, err := svc.Callback(context.Background(), "good", s, "")
		if err != nil || p.ID != 1 || len(c.updates) != 1 || *c.updates[0].Processor.AccountID != "acct_1" || *c.updates[0].Processor.Status != "connected" ||
			!c.updates[0].Processor.ConnectedAt.Equal(now) {
			t.Fatalf("callback: %+v %v %+v", p, err, c.updates)
		}
		if _, _, err := svc.Callback(context.Background(), "good", s, ""); !errors.Is(err, processorconnect.ErrBadState) || len(c.updates) != 1 {
			t.Fatalf("replay: %v", err)
		}
	})
	t.Run("an expired state is refused and stores nothing", func(t *testing.T) {
		svc, _, c, clock := setup(proc{})
		s := state(t, svc)
		*clock = now.Add(10 * time.Minute)
		if _, _, err := svc.Callback(context.Background(), "good", s, ""); !errors.Is(err, processorconnect.ErrBadState) || len(c.updates) != 0 {
			t.Fatalf("expired: %v", err)
		}
	})
	t.Run("a processor failure or a decline stores nothing and uses the state up", func(t *testing.T) {
		svc, _, c, _ := setup(proc{fail: true})
		s := state(t, svc)
		if _, _, err := svc.Callback(context.Background(), "good", s, ""); !errors.Is(err, processorconnect.ErrProcessor) || len(c.updates) != 0 {
			t.Fatalf("processor failure: %v", err)
		}
		if _, _, err := svc.Callback(context.Background(), "good", s, ""); !errors.Is(err, processorconnect.ErrBadState) {
			t.Fatalf("after failure: %v", err)
		}
		s = state(t, svc)
		if _, _, err := svc.Callback(context.Background(), "", s, "access_denied"); !errors.Is(err, processorconnect.ErrDeclined) || len(c.updates) != 0 {
			t.Fatalf("declined: %v", err)
		}
	})
	t.Run("without processor credentials connect answers not configured", func(t *testing.T) {
		svc, st, _, _ := setup(nil)
		if _, err := svc.Connect(context.Background(), 7, 1); !errors.Is(err, processorconnect.ErrNotConfigured) || len(st.states) != 0 {
			t.Fatalf("connect: %v", err)
		}
		if _, err := svc.Connect(context.Background(), 8, 1); !errors.Is(err, processorconnect.ErrReadOnly) {
			t.Fatalf("reader: %v", err)
		}
	})
}
