package identity

import (
	"context"
	"errors"
	"testing"
)

type memberships map[[2]int64]Access

func (m memberships) MemberAccess(_ context.Context, userID, programID int64) (Access, error) {
	if userID == 99 {
		return Access{}, errors.New("connection reset")
	}
	return m[[2]int64{userID, programID}], nil
}

func TestAuthorize(t *testing.T) {
	a, err := NewAuthorizer(memberships{
		{1, 10}: {ActiveMember: true, Permissions: CreatorPermissions()},
		{2, 10}: {ActiveMember: true, Permissions: []string{"tracking:read"}},
		{3, 10}: {ActiveMember: false, Permissions: CreatorPermissions()},
		{4, 10}: {ActiveMember: true, Blocked: true, Permissions: CreatorPermissions()},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name            string
		user, program   int64
		need            Permission
		want            error
		infrastructural bool
	}{
		{"writer may write", 1, 10, PermissionWrite, nil, false},
		{"writer may read", 1, 10, PermissionRead, nil, false},
		{"reader may read", 2, 10, PermissionRead, nil, false},
		{"reader may not write", 2, 10, PermissionWrite, ErrReadOnly, false},
		{"inactive member has no access", 3, 10, PermissionRead, ErrNoAccess, false},
		{"suspended member is blocked", 4, 10, PermissionRead, ErrBlocked, false},
		{"non-member has no access", 5, 10, PermissionRead, ErrNoAccess, false},
		{"missing program looks like no access", 1, 11, PermissionRead, ErrNoAccess, false},
		{"no program id", 1, 0, PermissionRead, ErrNoAccess, false},
		{"no user id", 0, 10, PermissionRead, ErrNoAccess, false},
		{"store failure is no refusal", 99, 10, PermissionRead, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.Authorize(ctx, tc.user, tc.program, tc.need)
			if tc.infrastructural {
				var ie *Error
				if err == nil || errors.As(err, &ie) {
					t.Fatalf("Authorize = %v, want an infrastructure error", err)
				}
				return
			}
			if err != tc.want { // the exact sentinel: its message is the contract
				t.Fatalf("Authorize = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSecrets(t *testing.T) {
	a, err := RandomString(32)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomString(32)
	if len(a) != 43 || a == b {
		t.Fatalf("RandomString(32) = %q, %q", a, b)
	}
	if h := HashSecret("x"); len(h) != 32 || string(h) == string(HashSecret("y")) {
		t.Fatalf("HashSecret")
	}
}
