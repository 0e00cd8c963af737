package catalog

import (
	"context"
	"strings"
	"unicode/utf8"
)

// A workspace is an advertiser a user owns (users.advertiser_id): the
// dashboard's sign-up makes one with its user, or for a user that has none.

// WorkspaceStore writes a workspace and its owner in one transaction, with
// both catalog events (advertiser, then user), so no advertiser is left
// without its owner and every replica learns both.
type WorkspaceStore interface {
	// CreateUserWithWorkspace stores a new user and a new advertiser it
	// owns. A *ConflictError, and nothing written, when the email is taken.
	CreateUserWithWorkspace(ctx context.Context, u User, a Advertiser) (User, Seq, error)
	// AddWorkspace gives an existing user without a workspace a new
	// advertiser; a user that has one meanwhile is answered as it is (Seq
	// 0, nothing written). A *NotFoundError when the user is gone.
	AddWorkspace(ctx context.Context, userID int64, a Advertiser) (User, Seq, error)
}

// NewWorkspaceUser validates a new user as CreateUser does, and names the
// workspace it will own after the person (their name, else their email).
func NewWorkspaceUser(in UserInput) (User, Advertiser, error) {
	in.AdvertiserID, in.Blocked = nil, nil
	u, err := in.validate()
	if err != nil {
		return User{}, Advertiser{}, err
	}
	return u, WorkspaceOf(u), nil
}

// WorkspaceOf is the advertiser a user's own workspace starts as: named
// after them (within the catalog's 200 characters), with their email.
func WorkspaceOf(u User) Advertiser {
	name := strings.TrimSpace(u.Name)
	if name == "" {
		name = u.Email
	}
	if len(name) > maxText {
		name = name[:maxText]
		for !utf8.ValidString(name) {
			name = name[:len(name)-1]
		}
	}
	return Advertiser{Name: name, Email: strings.ToLower(u.Email)}
}
