package cliauth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// The device-flow step (issue 23): whoever calls auth/start can send the
// sign-in link to someone else and poll for that person's login token. So
// start shows a short user code, which the CLI prints; the page the
// sign-in lands on shows the session's code and a confirmation holding a
// one-time value only that page has; the token is released to the poller
// only after the person confirmed there that the codes match.

// Refusals of auth/confirm.
var (
	ErrMissingConfirmToken = &Error{Kind: errkind.Invalid, Message: "Missing required fields: confirm_token"}
	ErrConfirmNotFound     = &Error{Kind: errkind.NotFound, Message: "Confirmation not found or already used"}
	ErrConfirmExpired      = &Error{Kind: errkind.Invalid, Message: "Session expired"}
)

// userCodeAlphabet has no vowels (no words spelled by chance) and no
// digits or letters easily mistaken for each other (RFC 8628, 6.1).
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// NewUserCode is 8 letters of userCodeAlphabet as XXXX-XXXX (about 34
// bits). It is no secret: it only lets a person see that the sign-in on
// the page is the one their terminal started.
func NewUserCode() (string, error) {
	b := make([]byte, 8)
	out := make([]byte, 0, 9)
	for len(out) < 9 {
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("new user code: %w", err)
		}
		for _, c := range b {
			// 240 is the largest multiple of 20 under 256: no bias.
			if c >= 240 || len(out) == 9 {
				continue
			}
			if len(out) == 4 {
				out = append(out, '-')
			}
			out = append(out, userCodeAlphabet[int(c)%len(userCodeAlphabet)])
		}
	}
	return string(out), nil
}

func (s *service) Confirm(ctx context.Context, confirmToken string) (Confirmed, error) {
	if confirmToken == "" {
		return Confirmed{}, ErrMissingConfirmToken
	}
	// A value is 256 random bits in base64url: anything much longer
	// matches nothing and is refused without a lookup.
	if len(confirmToken) > 128 {
		return Confirmed{}, ErrConfirmNotFound
	}
	sess, err := s.cfg.Store.SessionByConfirm(ctx, identity.HashSecret(confirmToken))
	if errors.Is(err, ErrConfirmNotFound) {
		return Confirmed{}, ErrConfirmNotFound
	}
	if err != nil {
		return Confirmed{}, fmt.Errorf("load sign-in session by confirmation: %w", err)
	}
	if sess.ConfirmedAt != nil || sess.ConsumedAt != nil || sess.UserID == 0 {
		return Confirmed{}, ErrConfirmNotFound
	}
	now := s.cfg.Now()
	// The person has as long as a sign-in link lives after signing in.
	if sess.SignedInAt == nil || !now.Before(sess.SignedInAt.Add(s.cfg.SessionTTL)) {
		return Confirmed{}, ErrConfirmExpired
	}
	ok, err := s.cfg.Store.ConfirmSession(ctx, sess.ID, now.UTC())
	if err != nil {
		return Confirmed{}, fmt.Errorf("confirm sign-in session: %w", err)
	}
	if !ok {
		return Confirmed{}, ErrConfirmNotFound
	}
	user, err := s.cfg.Store.UserByID(ctx, sess.UserID)
	if err != nil {
		return Confirmed{}, fmt.Errorf("load signed-in user: %w", err)
	}
	return Confirmed{User: user, UserCode: sess.UserCode}, nil
}
