package catalog

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
)

// keyStore records the keys stored; every other Store method is unused here
// (the embedded nil interface would panic if one were called).
type keyStore struct {
	Store
	created []APIKey
	lookups []string
}

func (s *keyStore) CreateAPIKey(_ context.Context, k APIKey) (APIKey, Seq, error) {
	k.ID = int64(len(s.created) + 1)
	s.created = append(s.created, k)
	return k, Seq(10 + len(s.created)), nil
}

func (s *keyStore) FindUserByEmail(_ context.Context, email string) (User, error) {
	s.lookups = append(s.lookups, email)
	return User{ID: 1, Email: email}, nil
}

func (s *keyStore) FindPartnersByEmail(_ context.Context, email string) ([]Partner, error) {
	s.lookups = append(s.lookups, email)
	return []Partner{}, nil
}

func (s *keyStore) ListPrograms(context.Context, int64) ([]Program, error) { return []Program{}, nil }

func (s *keyStore) ListLinks(context.Context, int64, *string) ([]Link, error) { return []Link{}, nil }

// fakeImport accepts "live:<x>" and "test:<x>"; its hash is the reversed
// value and its prefix the first 6 bytes.
func fakeImport(plain string) ([]byte, string, bool, error) {
	kind, _, ok := strings.Cut(plain, ":")
	if !ok || (kind != "live" && kind != "test") || len(plain) < 6 {
		return nil, "", false, errors.New("malformed")
	}
	h := []byte(plain)
	for i, j := 0, len(h)-1; i < j; i, j = i+1, j-1 {
		h[i], h[j] = h[j], h[i]
	}
	return h, plain[:6], kind == "test", nil
}

func newKeyService(t *testing.T) (*keyStore, Service) {
	t.Helper()
	st := &keyStore{}
	svc, err := NewService(Config{
		Store:    st,
		Keys:     func(test bool) (string, []byte, string, error) { return "generated", []byte("hash"), "gene", nil },
		Import:   fakeImport,
		Sessions: nopSessions{},
		Now:      func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, svc
}

type nopSessions struct{}

func (nopSessions) Issue(int64, string) (string, time.Time, error) { return "", time.Time{}, nil }

func bp(b bool) *bool { return &b }

func TestImportKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		plain    string
		test     *bool
		wantTest bool
		wantMsg  string // empty: stored
	}{
		{"live key, test not sent", "live:abcdef", nil, false, ""},
		{"test key, test not sent takes the key's kind", "test:abcdef", nil, true, ""},
		{"live key, test false", "live:abcdef", bp(false), false, ""},
		{"test key, test true", "test:abcdef", bp(true), true, ""},
		{"live key but test true", "live:abcdef", bp(true), false, MsgKeyTestKind},
		{"test key but test false", "test:abcdef", bp(false), false, MsgKeyLiveKind},
		{"malformed", "nope", nil, false, MsgKeyFormat},
		{"malformed even with test", "", bp(true), false, MsgKeyFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, svc := newKeyService(t)
			k, seq, err := svc.ImportKey(context.Background(), 7, tt.plain, tt.test)
			if tt.wantMsg != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != "key" || fe.Message != tt.wantMsg || !errors.Is(err, errkind.Invalid) {
					t.Fatalf("err = %v, want field key %q", err, tt.wantMsg)
				}
				if len(st.created) != 0 {
					t.Fatal("a refused key was stored")
				}
				if tt.plain != "" && strings.Contains(err.Error(), tt.plain) {
					t.Fatal("the message repeats the key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantHash, wantPrefix, _, _ := fakeImport(tt.plain)
			if len(st.created) != 1 {
				t.Fatalf("%d keys stored", len(st.created))
			}
			got := st.created[0]
			if got.ProgramID != 7 || !bytes.Equal(got.Hash, wantHash) || got.Prefix != wantPrefix || got.Test != tt.wantTest {
				t.Fatalf("stored %+v", got)
			}
			if k.Plain != tt.plain || k.ID != 1 || k.Test != tt.wantTest || seq != 11 {
				t.Fatalf("answered %+v seq %d", k, seq)
			}
		})
	}
}

func TestIssueKeyStillGenerates(t *testing.T) {
	t.Parallel()
	st, svc := newKeyService(t)
	k, _, err := svc.IssueKey(context.Background(), 3, true)
	if err != nil || k.Plain != "generated" || len(st.created) != 1 || !st.created[0].Test || st.created[0].Prefix != "gene" {
		t.Fatalf("%+v %v %+v", k, err, st.created)
	}
}

func TestLookupValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, svc := newKeyService(t)
	tests := []struct {
		name, field, msg string
		call             func() error
	}{
		{"user email missing", "email", "email is required", func() error { _, err := svc.FindUserByEmail(ctx, nil); return err }},
		{"user email blank", "email", "email is required", func() error { _, err := svc.FindUserByEmail(ctx, sp(" ")); return err }},
		{"user email invalid", "email", "email must be a valid email address", func() error { _, err := svc.FindUserByEmail(ctx, sp("nope")); return err }},
		{"partner email missing", "email", "email is required", func() error { _, err := svc.FindPartnersByEmail(ctx, nil); return err }},
		{"partner email invalid", "email", "email must be a valid email address", func() error { _, err := svc.FindPartnersByEmail(ctx, sp("a@")); return err }},
		{"advertiser missing", "advertiser_id", "advertiser_id is required", func() error { _, err := svc.ListPrograms(ctx, nil); return err }},
		{"advertiser not positive", "advertiser_id", "advertiser_id must be a positive integer", func() error { v := int64(0); _, err := svc.ListPrograms(ctx, &v); return err }},
		{"link code empty", "code", msgLinkCode, func() error { _, err := svc.ListLinks(ctx, 1, sp("")); return err }},
		{"link code bad", "code", msgLinkCode, func() error { _, err := svc.ListLinks(ctx, 1, sp("a b")); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fe *FieldError
			if err := tt.call(); !errors.As(err, &fe) || fe.Field != tt.field || fe.Message != tt.msg {
				t.Fatalf("err = %v, want %s: %q", err, tt.field, tt.msg)
			}
		})
	}
	if len(st.lookups) != 0 {
		t.Fatalf("invalid input reached the store: %v", st.lookups)
	}
	// Emails reach the store trimmed and in lower case.
	if _, err := svc.FindUserByEmail(ctx, sp(" Ann@Brand.Example ")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.FindPartnersByEmail(ctx, sp("P@X.example")); err != nil {
		t.Fatal(err)
	}
	if len(st.lookups) != 2 || st.lookups[0] != "ann@brand.example" || st.lookups[1] != "p@x.example" {
		t.Fatalf("store got %v", st.lookups)
	}
}

func (s *keyStore) UpdateAPIKey(_ context.Context, id int64, fn func(*APIKey) error) (APIKey, Seq, error) {
	k := &s.created[id-1]
	if err := fn(k); err != nil {
		return APIKey{}, 0, err
	}
	return *k, 20, nil
}

func TestIssuedKeyKeepsItsLastFourCharacters(t *testing.T) {
	t.Parallel()
	st, svc := newKeyService(t)
	if _, _, err := svc.IssueKey(context.Background(), 3, false); err != nil || st.created[0].Last4 != "ated" {
		t.Fatalf("%v %+v", err, st.created)
	}
	if _, _, err := svc.ImportKey(context.Background(), 3, "live:abcdef", nil); err != nil || st.created[1].Last4 != "cdef" {
		t.Fatalf("%v %+v", err, st.created)
	}
}

func TestRevokeKeyKeepsTheFirstRevocationTime(t *testing.T) {
	t.Parallel()
	st, svc := newKeyService(t)
	if _, _, err := svc.IssueKey(context.Background(), 3, false); err != nil {
		t.Fatal(err)
	}
	first := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	st.created[0].RevokedAt = &first
	k, _, err := svc.RevokeKey(context.Background(), 1)
	if err != nil || k.RevokedAt == nil || !k.RevokedAt.Equal(first) {
		t.Fatalf("%+v %v", k, err)
	}
	st.created[0].RevokedAt = nil
	k, _, err = svc.RevokeKey(context.Background(), 1)
	if err != nil || k.RevokedAt == nil || !k.RevokedAt.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v %v", k, err)
	}
}
