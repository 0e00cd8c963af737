package partners

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// fakeStore refuses the first taken codes as used, and records the links
// it was asked to write.
type fakeStore struct {
	taken int
	asked []catalog.Link
}

func (s *fakeStore) InvitePartner(_ context.Context, p catalog.Partner, l catalog.Link) (catalog.Partner, catalog.PartnerProgram, catalog.Link, catalog.Seq, error) {
	l, seq, err := s.CreatePartnerLink(context.Background(), l)
	return p, catalog.PartnerProgram{}, l, seq, err
}

func (s *fakeStore) CreatePartnerLink(_ context.Context, l catalog.Link) (catalog.Link, catalog.Seq, error) {
	s.asked = append(s.asked, l)
	if len(s.asked) <= s.taken {
		return catalog.Link{}, 0, catalog.ErrLinkCodeTaken
	}
	return l, 3, nil
}

func (s *fakeStore) SetPartnerApproval(context.Context, int64, int64, bool) (catalog.PartnerProgram, []catalog.Link, catalog.Seq, error) {
	return catalog.PartnerProgram{}, nil, 0, &catalog.NotFoundError{What: "partner"}
}

func (s *fakeStore) SetProgramLinkActive(context.Context, int64, int64, bool) (catalog.Link, catalog.Seq, error) {
	return catalog.Link{}, 0, &catalog.NotFoundError{What: "link"}
}

type noPartners struct{}

func (noPartners) FindPartnersByEmail(context.Context, *string) ([]catalog.Partner, error) {
	return []catalog.Partner{}, nil
}

// writer: user 1 writes program 1, user 2 reads it.
type writer struct{}

func (writer) Authorize(_ context.Context, userID, programID int64, need identity.Permission) error {
	switch {
	case userID == 1 && programID == 1:
		return nil
	case userID == 2 && programID == 1 && need == identity.PermissionWrite:
		return identity.ErrReadOnly
	}
	return identity.ErrNoAccess
}

func newService(t *testing.T, s *fakeStore) Service {
	t.Helper()
	svc, err := NewService(Config{Access: writer{}, Catalog: noPartners{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestGeneratedCodesRetryATakenCodeButAGivenOneIsTheCallers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &fakeStore{taken: 2}
	l, _, err := newService(t, s).CreateLink(ctx, 1, 1, 5, nil)
	if err != nil || len(s.asked) != 3 || l.Code != s.asked[2].Code || len(l.Code) != CodeLength {
		t.Fatalf("generated: %+v %v after %d attempts", l, err, len(s.asked))
	}
	for _, c := range l.Code {
		if !strings.ContainsRune(CodeAlphabet, c) {
			t.Fatalf("code %q has %q", l.Code, c)
		}
	}
	s = &fakeStore{taken: codeAttempts}
	if _, _, err := newService(t, s).CreateLink(ctx, 1, 1, 5, nil); !errors.Is(err, catalog.ErrLinkCodeTaken) || len(s.asked) != codeAttempts {
		t.Fatalf("bounded retries: %v after %d", err, len(s.asked))
	}
	s = &fakeStore{taken: 1}
	code := "ana"
	if _, _, err := newService(t, s).CreateLink(ctx, 1, 1, 5, &code); !errors.Is(err, catalog.ErrLinkCodeTaken) || len(s.asked) != 1 {
		t.Fatalf("given code: %v after %d", err, len(s.asked))
	}
	if _, _, err := newService(t, s).Invite(ctx, 1, 1, catalog.PartnerInput{Name: &code, Email: &code}, nil); !errors.Is(err, errkind.Invalid) || len(s.asked) != 1 {
		t.Fatalf("bad email: %v", err)
	}
}

func TestRefusalsAreThisFeaturesAndCheckedFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &fakeStore{}
	svc := newService(t, s)
	if _, _, err := svc.CreateLink(ctx, 2, 1, 5, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("reader: %v", err)
	}
	if _, _, err := svc.SetLinkActive(ctx, 3, 1, 5, false); !errors.Is(err, identity.ErrNoAccess) {
		t.Fatalf("non-member: %v", err)
	}
	if _, _, err := svc.SetApproval(ctx, 1, 1, 5, true); !errors.Is(err, ErrPartnerNotFound) {
		t.Fatalf("not enrolled: %v", err)
	}
	if _, _, err := svc.SetLinkActive(ctx, 1, 1, 5, true); !errors.Is(err, ErrLinkNotFound) {
		t.Fatalf("another program's link: %v", err)
	}
	if len(s.asked) != 0 {
		t.Fatalf("refusals wrote %v", s.asked)
	}
}
