package cliauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Config wires the service.
type Config struct {
	Store   Store
	Catalog catalog.Service
	// Verifier is nil when no OpenID provider is configured: the sign-in
	// routes then answer ErrNotConfigured and everything else still works.
	Verifier IDTokenVerifier
	// AuthURL is the provider's authorization endpoint; ClientID is sent
	// as client_id and expected as the id_token's audience; RedirectURL,
	// when set, is sent as redirect_uri.
	AuthURL     string
	ClientID    string
	RedirectURL string
	Now         func() time.Time
	SessionTTL  time.Duration // DefaultSessionTTL when zero
	TokenTTL    time.Duration // DefaultTokenTTL when zero
	// SweepAfter is how long finished sessions and expired tokens are kept
	// before Start deletes them (24h when zero).
	SweepAfter time.Duration
}

type service struct{ cfg Config }

// NewService checks the wiring.
func NewService(cfg Config) (Service, error) {
	if cfg.Store == nil || cfg.Catalog == nil || cfg.Now == nil {
		return nil, errors.New("cliauth: store, catalog service and clock are required")
	}
	if cfg.Verifier != nil && (cfg.AuthURL == "" || cfg.ClientID == "") {
		return nil, errors.New("cliauth: an id_token verifier needs the authorization URL and client id")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.SweepAfter <= 0 {
		cfg.SweepAfter = 24 * time.Hour
	}
	return &service{cfg: cfg}, nil
}

func (s *service) Start(ctx context.Context) (Started, error) {
	if s.cfg.Verifier == nil {
		return Started{}, ErrNotConfigured
	}
	state, err := identity.RandomString(32)
	if err != nil {
		return Started{}, fmt.Errorf("new state: %w", err)
	}
	nonce, err := identity.RandomString(16)
	if err != nil {
		return Started{}, fmt.Errorf("new nonce: %w", err)
	}
	code, err := NewUserCode()
	if err != nil {
		return Started{}, err
	}
	now := s.cfg.Now().UTC()
	link, err := s.signInURL(state, nonce)
	if err != nil {
		return Started{}, err
	}
	// Old sessions and tokens go first, a batch per start, so the tables
	// stay small without a background job.
	if err := s.cfg.Store.Sweep(ctx, now.Add(-s.cfg.SweepAfter)); err != nil {
		return Started{}, fmt.Errorf("sweep sign-in sessions: %w", err)
	}
	sess, err := s.cfg.Store.CreateSession(ctx, Session{
		StateHash: identity.HashSecret(state), Nonce: nonce, UserCode: code, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL),
	})
	if err != nil {
		return Started{}, fmt.Errorf("create sign-in session: %w", err)
	}
	return Started{State: state, URL: link, UserCode: code, ExpiresAt: sess.ExpiresAt}, nil
}

// signInURL adds the OpenID implicit-flow parameters to the provider's
// authorization endpoint, keeping any query it already has.
func (s *service) signInURL(state, nonce string) (string, error) {
	u, err := url.Parse(s.cfg.AuthURL)
	if err != nil {
		return "", fmt.Errorf("authorization url: %w", err)
	}
	q := u.Query()
	q.Set("client_id", s.cfg.ClientID)
	q.Set("response_type", "id_token")
	q.Set("scope", "openid email")
	q.Set("state", state)
	q.Set("nonce", nonce)
	if s.cfg.RedirectURL != "" {
		q.Set("redirect_uri", s.cfg.RedirectURL)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (s *service) Callback(ctx context.Context, state, idToken string) (SignedIn, error) {
	if state == "" || idToken == "" {
		return SignedIn{}, ErrMissingCallbackFields
	}
	if s.cfg.Verifier == nil {
		return SignedIn{}, ErrNotConfigured
	}
	sess, err := s.cfg.Store.SessionByState(ctx, identity.HashSecret(state))
	if errors.Is(err, ErrSessionNotFound) {
		return SignedIn{}, ErrSessionNotFoundOrUsed
	}
	if err != nil {
		return SignedIn{}, fmt.Errorf("load sign-in session: %w", err)
	}
	if sess.UserID != 0 || sess.ConsumedAt != nil {
		return SignedIn{}, ErrSessionNotFoundOrUsed
	}
	now := s.cfg.Now()
	if !now.Before(sess.ExpiresAt) {
		return SignedIn{}, ErrSessionExpired
	}
	user, err := s.Identify(ctx, idToken, sess.Nonce)
	if err != nil {
		return SignedIn{}, err
	}
	// The value that confirms the codes match goes only to whoever
	// presented the id_token (the landing page), never to the poller: the
	// poller may be someone who sent the link to the person signing in.
	confirm, err := identity.RandomString(32)
	if err != nil {
		return SignedIn{}, fmt.Errorf("new confirmation value: %w", err)
	}
	ok, err := s.cfg.Store.LinkSession(ctx, sess.ID, user.ID, now, identity.HashSecret(confirm))
	if err != nil {
		return SignedIn{}, fmt.Errorf("link sign-in session: %w", err)
	}
	if !ok {
		// Another callback won the race, or the link expired meanwhile.
		return SignedIn{}, ErrSessionNotFoundOrUsed
	}
	return SignedIn{User: user, UserCode: sess.UserCode, ConfirmToken: confirm}, nil
}

// Identify checks an id_token the way every sign-in does (the provider's
// signature, issuer, audience, expiry; the session's nonce in constant
// time; an email the provider has verified) and resolves it to its user by
// the provider's issuer and subject, created when new (a plain user,
// without a workspace); a blocked user, and a known email arriving with
// another identity, are refused. The dashboard's browser sign-in
// (internal/dashauth) calls IdentifyWith, so both sign-ins accept and
// refuse exactly the same tokens and differ only in what they make of a
// newcomer.
func (s *service) Identify(ctx context.Context, idToken, nonce string) (catalog.User, error) {
	return s.IdentifyWith(ctx, idToken, nonce, plainUsers{s.cfg.Catalog})
}

func (s *service) IdentifyWith(ctx context.Context, idToken, nonce string, n identity.Newcomers) (catalog.User, error) {
	if s.cfg.Verifier == nil {
		return catalog.User{}, ErrNotConfigured
	}
	id, err := s.cfg.Verifier.Verify(ctx, idToken)
	if err != nil {
		if errors.Is(err, errkind.Unavailable) {
			return catalog.User{}, fmt.Errorf("verify id_token: %w", err)
		}
		return catalog.User{}, &refusal{public: ErrInvalidIDToken, reason: err}
	}
	if subtle.ConstantTimeCompare([]byte(id.Nonce), []byte(nonce)) != 1 {
		return catalog.User{}, &refusal{public: ErrInvalidIDToken, reason: errors.New("nonce does not match the session's")}
	}
	email := strings.TrimSpace(id.Email)
	if email == "" {
		return catalog.User{}, &refusal{public: ErrInvalidIDToken, reason: errors.New("no email claim")}
	}
	// Unverified first: until the provider vouches for the address, it
	// names nobody, so it cannot be matched to (or reveal) an account.
	if !id.EmailVerified {
		return catalog.User{}, ErrEmailNotVerified
	}
	// Matched on the provider's issuer and subject, not the email
	// (identity.go).
	return s.userForIdentity(ctx, id, email, n)
}

// plainUsers is the command-line sign-in's newcomer rule: a user without
// an advertiser, made through the catalog (so its event reaches the
// replicas); nothing more for a known user.
type plainUsers struct{ cat catalog.Service }

func (p plainUsers) NewUser(ctx context.Context, email, name string) (catalog.User, error) {
	in := catalog.UserInput{Email: &email}
	if name = strings.TrimSpace(name); name != "" {
		if len(name) > 200 {
			name = name[:200]
		}
		in.Name = &name
	}
	u, _, err := p.cat.CreateUser(ctx, in)
	return u, err
}

func (plainUsers) Known(_ context.Context, u catalog.User) (catalog.User, error) { return u, nil }

// userFor finds the user with this email, or has n make one.
func (s *service) userFor(ctx context.Context, email, name string, n identity.Newcomers) (catalog.User, error) {
	u, err := s.cfg.Store.UserByEmail(ctx, email)
	if err == nil {
		return u, nil
	}
	if !errors.Is(err, errkind.NotFound) {
		return catalog.User{}, fmt.Errorf("find user by email: %w", err)
	}
	u, err = n.NewUser(ctx, email, name)
	var ie *identity.Error
	switch {
	case err == nil:
		return u, nil
	case errors.As(err, &ie):
		return catalog.User{}, err
	case errors.Is(err, errkind.Conflict):
		// A concurrent sign-in created it first.
		u, err = s.cfg.Store.UserByEmail(ctx, email)
		if err != nil {
			return catalog.User{}, fmt.Errorf("find user by email after conflict: %w", err)
		}
		return u, nil
	case errors.Is(err, errkind.Invalid):
		// The provider's address is not one the catalog accepts.
		return catalog.User{}, &refusal{public: ErrInvalidIDToken, reason: fmt.Errorf("email claim refused: %w", err)}
	}
	return catalog.User{}, fmt.Errorf("create user: %w", err)
}

func (s *service) Poll(ctx context.Context, state string) (PollResult, error) {
	if state == "" {
		return PollResult{}, ErrMissingState
	}
	sess, err := s.cfg.Store.SessionByState(ctx, identity.HashSecret(state))
	if err != nil {
		if errors.Is(err, ErrSessionNotFound) {
			return PollResult{}, ErrSessionNotFound
		}
		return PollResult{}, fmt.Errorf("load sign-in session: %w", err)
	}
	if sess.ConsumedAt != nil {
		return PollResult{}, ErrSessionConsumed
	}
	now := s.cfg.Now()
	if sess.UserID == 0 {
		if !now.Before(sess.ExpiresAt) {
			return PollResult{Status: StatusExpired}, nil
		}
		return PollResult{Status: StatusPending}, nil
	}
	// Signed in but not confirmed: still pending (the token is released
	// only once the person confirmed the code), for as long as a sign-in
	// link lives.
	if sess.ConfirmedAt == nil {
		if sess.SignedInAt != nil && !now.Before(sess.SignedInAt.Add(s.cfg.SessionTTL)) {
			return PollResult{Status: StatusExpired}, nil
		}
		return PollResult{Status: StatusPending}, nil
	}
	// A confirmed session waits for its poller as long as a sign-in link
	// lives: a client that stopped polling does not get a token later.
	if !now.Before(sess.ConfirmedAt.Add(s.cfg.SessionTTL)) {
		return PollResult{Status: StatusExpired}, nil
	}
	secret, err := identity.RandomString(32)
	if err != nil {
		return PollResult{}, fmt.Errorf("new login token: %w", err)
	}
	token := LoginTokenPrefix + secret
	now = now.UTC()
	exp := now.Add(s.cfg.TokenTTL).Truncate(time.Second)
	ok, err := s.cfg.Store.ConsumeSession(ctx, sess.ID, now, LoginToken{
		Hash: identity.HashSecret(token), UserID: sess.UserID, SessionID: sess.ID, CreatedAt: now, ExpiresAt: exp,
	})
	if err != nil {
		return PollResult{}, fmt.Errorf("consume sign-in session: %w", err)
	}
	if !ok {
		return PollResult{}, ErrSessionConsumed
	}
	user, err := s.cfg.Store.UserByID(ctx, sess.UserID)
	if err != nil {
		return PollResult{}, fmt.Errorf("load signed-in user: %w", err)
	}
	return PollResult{Status: StatusComplete, Token: token, TokenExpiresAt: exp, User: user}, nil
}

func (s *service) Authenticate(ctx context.Context, token string) (catalog.User, error) {
	// A login token is a fixed-length string; anything else matches nothing
	// and is refused without a lookup.
	if !strings.HasPrefix(token, LoginTokenPrefix) || len(token) > 128 {
		return catalog.User{}, ErrTokenInvalid
	}
	u, err := s.cfg.Store.UserByToken(ctx, identity.HashSecret(token), s.cfg.Now())
	if err != nil {
		if errors.Is(err, errkind.Unauthenticated) {
			return catalog.User{}, err
		}
		return catalog.User{}, fmt.Errorf("look up login token: %w", err)
	}
	if u.Blocked {
		return catalog.User{}, ErrAccountBlocked
	}
	return u, nil
}

// sameAdvertiser reports whether a raw advertiser_id names the account's
// advertiser: a whole JSON number (12, 12.0) or a string of its digits.
func sameAdvertiser(raw string, advertiserID int64) bool {
	raw = strings.TrimSpace(raw)
	want := strconv.FormatInt(advertiserID, 10)
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		return raw[1:len(raw)-1] == want
	}
	r, ok := catalog.JSONNumber(raw)
	return ok && r.IsInt() && r.Num().String() == want
}

func (s *service) Init(ctx context.Context, user catalog.User, in InitInput) (Initialized, error) {
	if user.AdvertiserID == 0 {
		return Initialized{}, ErrNoAdvertiser
	}
	if in.AdvertiserID != nil && !sameAdvertiser(*in.AdvertiserID, user.AdvertiserID) {
		return Initialized{}, ErrAdvertiserMismatch
	}
	pin := in.Program
	adv := strconv.FormatInt(user.AdvertiserID, 10)
	pin.AdvertiserID = &adv
	// The admin API's own path: same validation, order and messages, and
	// the program's catalog event.
	prog, seq, err := s.cfg.Catalog.CreateProgram(ctx, pin)
	if err != nil {
		if errors.Is(err, errkind.Invalid) {
			return Initialized{}, err
		}
		return Initialized{}, fmt.Errorf("create program: %w", err)
	}
	_, mseq, err := s.cfg.Catalog.PutMember(ctx, prog.ID, catalog.MemberInput{
		UserID: &user.ID, Active: ptr(true), Permissions: identity.CreatorPermissions(),
	})
	if err != nil {
		return Initialized{}, fmt.Errorf("add creator to program %d: %w", prog.ID, err)
	}
	key, kseq, err := s.cfg.Catalog.IssueKey(ctx, prog.ID, false)
	if err != nil {
		return Initialized{}, fmt.Errorf("issue first key of program %d: %w", prog.ID, err)
	}
	return Initialized{Program: prog, APIKey: key.Plain, Seq: max(seq, mseq, kseq)}, nil
}

func ptr[T any](v T) *T { return &v }

func (s *service) Programs(ctx context.Context, user catalog.User) ([]catalog.Program, error) {
	if user.AdvertiserID == 0 {
		return []catalog.Program{}, nil
	}
	ids, err := s.cfg.Store.ProgramIDsByAdvertiser(ctx, user.AdvertiserID)
	if err != nil {
		return nil, fmt.Errorf("list programs of advertiser %d: %w", user.AdvertiserID, err)
	}
	// Programs are read through the catalog so they look exactly as the
	// admin API shows them; an advertiser has a handful.
	out := make([]catalog.Program, 0, len(ids))
	for _, id := range ids {
		p, err := s.cfg.Catalog.GetProgram(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("load program %d: %w", id, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// refusal is a public refusal that keeps its reason for the logs.
type refusal struct {
	public *Error
	reason error
}

func (r *refusal) Error() string   { return r.public.Message + ": " + r.reason.Error() }
func (r *refusal) Unwrap() []error { return []error{r.public, r.reason} }
