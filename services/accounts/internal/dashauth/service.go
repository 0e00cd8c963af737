package dashauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Config wires the service.
type Config struct {
	Store  Store
	Tokens TokenIssuer
	// Identifier is nil when no OpenID provider is configured: Start and
	// Callback then answer ErrNotConfigured; Me still works.
	Identifier Identifier
	// AuthURL is the provider's authorization endpoint, ClientID the
	// client_id, CallbackURL the redirect_uri the provider posts to.
	AuthURL     string
	ClientID    string
	CallbackURL string
	// DashboardPath is where a sign-in without return_to lands.
	DashboardPath string
	Now           func() time.Time
	SessionTTL    time.Duration // DefaultSessionTTL when zero
	SweepAfter    time.Duration // 24h when zero
}

type service struct{ cfg Config }

// NewService checks the wiring.
func NewService(cfg Config) (Service, error) {
	if cfg.Store == nil || cfg.Tokens == nil || cfg.Now == nil {
		return nil, errors.New("dashauth: store, token issuer and clock are required")
	}
	if cfg.Identifier != nil && (cfg.AuthURL == "" || cfg.ClientID == "" || cfg.CallbackURL == "") {
		return nil, errors.New("dashauth: sign-in needs the authorization URL, client id and callback URL")
	}
	if _, err := SafeReturnTo(cfg.DashboardPath); err != nil {
		return nil, fmt.Errorf("dashauth: dashboard path %q must be a path under %s", cfg.DashboardPath, DashboardPrefix)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.SweepAfter <= 0 {
		cfg.SweepAfter = 24 * time.Hour
	}
	return &service{cfg: cfg}, nil
}

// SafeReturnTo accepts a path under DashboardPrefix only: it starts with
// the prefix as written, has no scheme, host, backslash, fragment, control
// character, "." or ".." segment or percent-encoded slash or backslash
// (each could lead the browser, and the session in its fragment, to
// another page or site), and is at most 512 bytes. Only the dashboard page
// checks that a session fragment is the one its tab asked for.
func SafeReturnTo(raw string) (string, error) {
	if len(raw) > 512 || !strings.HasPrefix(raw, DashboardPrefix) || !utf8.ValidString(raw) {
		return "", ErrBadReturnTo
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f || r == '\\' || r == '#' {
			return "", ErrBadReturnTo
		}
	}
	if low := strings.ToLower(raw); strings.Contains(low, "%2f") || strings.Contains(low, "%5c") {
		return "", ErrBadReturnTo
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, DashboardPrefix) {
		return "", ErrBadReturnTo
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return "", ErrBadReturnTo
		}
	}
	return raw, nil
}

// validTabNonce is 16 to 128 characters of the URL-safe base64 alphabet, so
// it goes into the fragment as it is.
func validTabNonce(n string) bool {
	if len(n) < 16 || len(n) > 128 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (s *service) Start(ctx context.Context, returnTo, tabNonce string) (Started, error) {
	if returnTo == "" {
		returnTo = s.cfg.DashboardPath
	}
	returnTo, err := SafeReturnTo(returnTo)
	if err != nil {
		return Started{}, err
	}
	if tabNonce != "" && !validTabNonce(tabNonce) {
		return Started{}, ErrBadTabNonce
	}
	if s.cfg.Identifier == nil {
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
	u, err := url.Parse(s.cfg.AuthURL)
	if err != nil {
		return Started{}, fmt.Errorf("authorization url: %w", err)
	}
	q := u.Query()
	q.Set("client_id", s.cfg.ClientID)
	q.Set("response_type", "id_token")
	// form_post: the provider posts the id_token to the callback, so it
	// never sits in a URL (history, logs, Referer).
	q.Set("response_mode", "form_post")
	q.Set("scope", "openid email")
	q.Set("redirect_uri", s.cfg.CallbackURL)
	q.Set("state", state)
	q.Set("nonce", nonce)
	u.RawQuery = q.Encode()

	now := s.cfg.Now().UTC()
	if err := s.cfg.Store.Sweep(ctx, now.Add(-s.cfg.SweepAfter)); err != nil {
		return Started{}, fmt.Errorf("sweep dashboard sign-ins: %w", err)
	}
	exp := now.Add(s.cfg.SessionTTL)
	if err := s.cfg.Store.CreateSession(ctx, Session{
		StateHash: identity.HashSecret(state), Nonce: nonce, ReturnTo: returnTo, TabNonce: tabNonce, CreatedAt: now, ExpiresAt: exp,
	}); err != nil {
		return Started{}, fmt.Errorf("create dashboard sign-in: %w", err)
	}
	return Started{URL: u.String(), State: state, ExpiresAt: exp}, nil
}

func (s *service) Callback(ctx context.Context, state, idToken, browserState string) (SignedIn, error) {
	if state == "" || idToken == "" {
		return SignedIn{}, ErrMissingFields
	}
	if s.cfg.Identifier == nil {
		return SignedIn{}, ErrNotConfigured
	}
	// The state must be the one this browser started (its cookie): a
	// sign-in finished in someone else's browser would sign them in as us.
	if subtle.ConstantTimeCompare([]byte(state), []byte(browserState)) != 1 {
		return SignedIn{}, ErrOtherBrowser
	}
	sess, err := s.cfg.Store.SessionByState(ctx, identity.HashSecret(state))
	if errors.Is(err, ErrSessionNotFound) {
		return SignedIn{}, ErrSessionNotFound
	}
	if err != nil {
		return SignedIn{}, fmt.Errorf("load dashboard sign-in: %w", err)
	}
	if sess.ConsumedAt != nil {
		return SignedIn{}, ErrSessionNotFound
	}
	now := s.cfg.Now()
	if !now.Before(sess.ExpiresAt) {
		return SignedIn{}, ErrSessionExpired
	}
	user, err := s.cfg.Identifier.Identify(ctx, idToken, sess.Nonce)
	if err != nil {
		return SignedIn{}, err
	}
	ok, err := s.cfg.Store.ConsumeSession(ctx, sess.ID, now.UTC())
	if err != nil {
		return SignedIn{}, fmt.Errorf("consume dashboard sign-in: %w", err)
	}
	if !ok {
		return SignedIn{}, ErrSessionNotFound
	}
	tok, exp, err := s.cfg.Tokens.IssueDashboard(user.ID)
	if err != nil {
		return SignedIn{}, fmt.Errorf("issue dashboard session: %w", err)
	}
	return SignedIn{Token: tok, ExpiresAt: exp, ReturnTo: sess.ReturnTo, TabNonce: sess.TabNonce, User: user}, nil
}

func (s *service) Me(ctx context.Context, userID int64) (Me, error) {
	u, err := s.cfg.Store.UserByID(ctx, userID)
	if errors.Is(err, errkind.NotFound) {
		return Me{}, ErrUserNotFound
	}
	if err != nil {
		return Me{}, fmt.Errorf("load user %d: %w", userID, err)
	}
	if u.Blocked {
		return Me{}, ErrAccountBlocked
	}
	ps, err := s.cfg.Store.Memberships(ctx, userID)
	if err != nil {
		return Me{}, fmt.Errorf("list programs of user %d: %w", userID, err)
	}
	ws, err := s.cfg.Store.Workspaces(ctx, userID)
	if err != nil {
		return Me{}, fmt.Errorf("list workspaces of user %d: %w", userID, err)
	}
	return Me{User: u, Workspaces: ws, Programs: ps}, nil
}
