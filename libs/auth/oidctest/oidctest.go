// Package oidctest is a small OpenID provider for tests and the local stack:
// it holds a signing key pair, publishes the public half as a JWKS (on a
// loopback HTTP server, or as a file), mints id_tokens with whatever claims a
// test chooses, and can play the provider's sign-in page so a command-line
// sign-in completes without a browser or a real identity provider.
//
// It signs with go-jose, the JOSE library go-oidc itself verifies with, so a
// token minted here goes through exactly the checks a real provider's token
// does on the server side.
package oidctest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Signing algorithms a Provider can use. RS256 is the default because it is
// the one algorithm every OpenID provider must support, and the default of
// go-oidc's verifier.
const (
	RS256 = "RS256"
	ES256 = "ES256"
	EdDSA = "EdDSA"
)

// DefaultClientID is the audience of minted tokens unless WithClientID says
// otherwise.
const DefaultClientID = "svc-cli"

// Paths served by Handler; the sign-in page's can be changed with
// WithAuthPath.
const (
	PathDiscovery = "/.well-known/openid-configuration"
	PathJWKS      = "/jwks"
	PathAuthorize = "/authorize"
)

// Option configures a Provider.
type Option func(*config)

type config struct {
	issuer   string
	clientID string
	alg      string
	keyID    string
	now      func() time.Time
	ttl      time.Duration
	client   *http.Client
	authPath string
}

// WithIssuer sets the issuer (iss) instead of the loopback server's URL. A
// provider built with New has no server, so it needs one.
func WithIssuer(iss string) Option { return func(c *config) { c.issuer = iss } }

// WithClientID sets the default audience (aud) of minted tokens.
func WithClientID(id string) Option { return func(c *config) { c.clientID = id } }

// WithAlgorithm picks the signing algorithm: RS256 (default), ES256 or EdDSA.
func WithAlgorithm(alg string) Option { return func(c *config) { c.alg = alg } }

// WithKeyID sets the key id (kid) published in the JWKS and token headers.
func WithKeyID(kid string) Option { return func(c *config) { c.keyID = kid } }

// WithClock sets the clock behind default iat and exp claims.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithTokenTTL sets the default lifetime of minted tokens (10 minutes).
func WithTokenTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithAuthPath serves the sign-in page at path instead of PathAuthorize, as
// providers whose authorization endpoint is not {issuer}/authorize do
// (Google's /o/oauth2/v2/auth): AuthURL and the discovery document's
// authorization_endpoint follow it.
func WithAuthPath(path string) Option { return func(c *config) { c.authPath = path } }

// WithHTTPClient sets the client the sign-in page uses to deliver tokens to
// a SignIn's CallbackURL.
func WithHTTPClient(c *http.Client) Option { return func(cfg *config) { cfg.client = c } }

// Provider is a test OpenID provider. It is safe for concurrent use.
type Provider struct {
	cfg  config
	priv crypto.Signer
	srv  *httptest.Server

	mu      sync.Mutex
	issuer  string
	baseURL string
	signIn  *SignIn
}

// New makes a provider with a fresh key pair and no server: give it an
// issuer with WithIssuer, publish its keys with JWKS or WriteJWKSFile, and
// serve Handler yourself if you need the HTTP endpoints.
func New(opts ...Option) (*Provider, error) {
	cfg := config{clientID: DefaultClientID, alg: RS256, now: time.Now, ttl: 10 * time.Minute, authPath: PathAuthorize}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.client == nil {
		cfg.client = &http.Client{Timeout: 30 * time.Second}
	}
	if !strings.HasPrefix(cfg.authPath, "/") || cfg.authPath == PathDiscovery || cfg.authPath == PathJWKS {
		return nil, fmt.Errorf("oidctest: sign-in page path %q must start with / and differ from %s and %s", cfg.authPath, PathDiscovery, PathJWKS)
	}
	priv, err := generateKey(cfg.alg)
	if err != nil {
		return nil, err
	}
	if cfg.keyID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("oidctest: key id: %w", err)
		}
		cfg.keyID = hex.EncodeToString(b[:])
	}
	return &Provider{cfg: cfg, priv: priv, issuer: cfg.issuer}, nil
}

// Start makes a provider and serves it on a loopback httptest server that
// is closed when the test ends. Its issuer is the server's URL unless
// WithIssuer says otherwise.
func Start(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	p, err := New(opts...)
	if err != nil {
		t.Fatalf("oidctest: %v", err)
	}
	p.srv = httptest.NewServer(p.Handler())
	t.Cleanup(p.srv.Close)
	p.mu.Lock()
	p.baseURL = p.srv.URL
	if p.issuer == "" {
		p.issuer = p.srv.URL
	}
	p.mu.Unlock()
	return p
}

// SetBaseURL tells a provider served by its owner (through Handler) where it
// is reachable, for JWKSURL, AuthURL and the discovery document; the issuer
// defaults to it when none was set.
func (p *Provider) SetBaseURL(u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.baseURL = strings.TrimRight(u, "/")
	if p.issuer == "" {
		p.issuer = p.baseURL
	}
}

func generateKey(alg string) (crypto.Signer, error) {
	switch alg {
	case RS256:
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("oidctest: rsa key: %w", err)
		}
		return k, nil
	case ES256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("oidctest: ecdsa key: %w", err)
		}
		return k, nil
	case EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("oidctest: ed25519 key: %w", err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("oidctest: unsupported algorithm %q (want RS256, ES256 or EdDSA)", alg)
}

// Issuer is the iss of minted tokens (OIDC_ISSUER).
func (p *Provider) Issuer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.issuer
}

// ClientID is the default aud of minted tokens (OIDC_AUDIENCE).
func (p *Provider) ClientID() string { return p.cfg.clientID }

// Algorithm is the signing algorithm.
func (p *Provider) Algorithm() string { return p.cfg.alg }

// KeyID is the kid of the signing key.
func (p *Provider) KeyID() string { return p.cfg.keyID }

// PublicKey is the public half of the signing key.
func (p *Provider) PublicKey() crypto.PublicKey { return p.priv.Public() }

// URL is where the provider is served ("" when nobody serves it).
func (p *Provider) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.baseURL
}

// JWKSURL is the address of the published key set (OIDC_JWKS_URL).
func (p *Provider) JWKSURL() string {
	if u := p.URL(); u != "" {
		return u + PathJWKS
	}
	return ""
}

// AuthURL is the sign-in page (OIDC_AUTH_URL), at PathAuthorize unless
// WithAuthPath says otherwise.
func (p *Provider) AuthURL() string {
	if u := p.URL(); u != "" {
		return u + p.cfg.authPath
	}
	return ""
}

// Env is the accounts service's OpenID configuration for this provider:
// OIDC_ISSUER, OIDC_AUDIENCE, OIDC_AUTH_URL and OIDC_JWKS_URL (when served).
func (p *Provider) Env() map[string]string {
	env := map[string]string{"OIDC_ISSUER": p.Issuer(), "OIDC_AUDIENCE": p.ClientID(), "OIDC_AUTH_URL": p.AuthURL()}
	if u := p.JWKSURL(); u != "" {
		env["OIDC_JWKS_URL"] = u
	}
	return env
}

// JWKS is the public key set as JSON: {"keys":[{kty, kid, use:"sig", alg, ...}]}.
func (p *Provider) JWKS() ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: p.priv.Public(), KeyID: p.cfg.keyID, Algorithm: p.cfg.alg, Use: "sig",
	}}}
	b, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("oidctest: marshal jwks: %w", err)
	}
	return b, nil
}

// WriteJWKSFile writes the public key set to path (mode 0644: it holds only
// public keys), for OIDC_JWKS_FILE.
func (p *Provider) WriteJWKSFile(path string) error {
	b, err := p.JWKS()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("oidctest: write jwks file: %w", err)
	}
	return nil
}

// Claims are an id_token's claims. Empty fields get defaults: Issuer the
// provider's, Audience its client id, Subject derived from Email, IssuedAt
// now and ExpiresAt IssuedAt plus the token TTL. EmailVerified has no
// default: set it, as a real provider would. Omit drops claims by name
// (e.g. "exp", "email_verified") and Extra adds or overrides claims.
type Claims struct {
	Issuer        string
	Audience      []string
	Subject       string
	Email         string
	EmailVerified bool
	Name          string
	Nonce         string
	IssuedAt      time.Time
	ExpiresAt     time.Time
	Omit          []string
	Extra         map[string]any
}

// Map returns the claims as they will be signed, defaults applied.
func (p *Provider) Map(c Claims) map[string]any {
	now := p.cfg.now()
	if c.Issuer == "" {
		c.Issuer = p.Issuer()
	}
	if len(c.Audience) == 0 {
		c.Audience = []string{p.cfg.clientID}
	}
	if c.Subject == "" {
		c.Subject = "sub-" + strings.ToLower(c.Email)
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = now
	}
	if c.ExpiresAt.IsZero() {
		c.ExpiresAt = c.IssuedAt.Add(p.cfg.ttl)
	}
	m := map[string]any{
		"iss":            c.Issuer,
		"sub":            c.Subject,
		"iat":            c.IssuedAt.Unix(),
		"exp":            c.ExpiresAt.Unix(),
		"email_verified": c.EmailVerified,
	}
	if len(c.Audience) == 1 {
		m["aud"] = c.Audience[0]
	} else {
		m["aud"] = c.Audience
	}
	if c.Email != "" {
		m["email"] = c.Email
	}
	if c.Name != "" {
		m["name"] = c.Name
	}
	if c.Nonce != "" {
		m["nonce"] = c.Nonce
	}
	for _, k := range c.Omit {
		delete(m, k)
	}
	for k, v := range c.Extra {
		m[k] = v
	}
	return m
}

// Sign mints a compact-serialised id_token (JWS) with the claims.
func (p *Provider) Sign(c Claims) (string, error) {
	return p.SignMap(p.Map(c))
}

// SignMap signs an arbitrary claim set, for tests of malformed tokens.
func (p *Provider) SignMap(claims map[string]any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("oidctest: marshal claims: %w", err)
	}
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), p.cfg.keyID)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(p.cfg.alg), Key: p.priv}, opts)
	if err != nil {
		return "", fmt.Errorf("oidctest: signer: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("oidctest: sign: %w", err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("oidctest: serialise: %w", err)
	}
	return tok, nil
}

// IDToken is Sign that fails the test on error.
func (p *Provider) IDToken(t testing.TB, c Claims) string {
	t.Helper()
	tok, err := p.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// AuthRequest is what a sign-in link asks of the provider.
type AuthRequest struct {
	ClientID     string
	ResponseType string
	Scope        string
	State        string
	Nonce        string
	RedirectURI  string
	// ResponseMode is "form_post" when the token is to be posted to
	// RedirectURI by the browser (the dashboard's sign-in), "" otherwise.
	ResponseMode string
}

// ParseAuthURL reads the OpenID parameters of a sign-in link (the url that
// POST /api/v1/cli/auth/start answers), so a test can mint a token for its
// nonce.
func ParseAuthURL(raw string) (AuthRequest, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return AuthRequest{}, fmt.Errorf("oidctest: parse sign-in url: %w", err)
	}
	return authRequest(u.Query())
}

func authRequest(q url.Values) (AuthRequest, error) {
	r := AuthRequest{
		ClientID: q.Get("client_id"), ResponseType: q.Get("response_type"), Scope: q.Get("scope"),
		State: q.Get("state"), Nonce: q.Get("nonce"), RedirectURI: q.Get("redirect_uri"),
		ResponseMode: q.Get("response_mode"),
	}
	if r.State == "" || r.Nonce == "" || r.ClientID == "" {
		return r, errors.New("oidctest: sign-in url needs client_id, state and nonce")
	}
	return r, nil
}

// SignIn is the user the sign-in page signs in as.
type SignIn struct {
	Email         string
	EmailVerified bool
	Name          string
	// CallbackURL, when set, makes the sign-in page act as the browser page
	// that completes a command-line sign-in: it POSTs {"state","id_token"}
	// there (e.g. http://127.0.0.1:8080/api/v1/cli/auth/callback) and shows
	// the answer. A browser's navigation (Accept naming text/html) gets the
	// form-post page for CallbackURL instead, so the browser itself lands
	// on the callback's page (where the command-line sign-in is confirmed).
	// Otherwise the page redirects to redirect_uri with the
	// token in the fragment (implicit flow), or, with no redirect_uri,
	// answers {"state","id_token"} as JSON. A request with
	// response_mode=form_post and a redirect_uri (the dashboard's browser
	// sign-in) always gets the form-post page instead: a form that posts
	// state and id_token to redirect_uri from the browser, as real
	// providers do.
	CallbackURL string
	// AutoSubmit makes the form-post page submit itself (one click signs
	// in); otherwise it waits for its "Continue" button.
	AutoSubmit bool
}

// SetSignIn sets who the sign-in page signs in as; nil makes it refuse.
func (p *Provider) SetSignIn(s *SignIn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == nil {
		p.signIn = nil
		return
	}
	c := *s
	p.signIn = &c
}

func (p *Provider) currentSignIn() *SignIn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signIn
}

// Handler serves the discovery document, the JWKS and the sign-in page.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathDiscovery, p.serveDiscovery)
	mux.HandleFunc("GET "+PathJWKS, p.serveJWKS)
	mux.HandleFunc("GET "+p.cfg.authPath, p.serveAuthorize)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (p *Provider) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.Issuer(),
		"authorization_endpoint":                p.AuthURL(),
		"jwks_uri":                              p.JWKSURL(),
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{p.cfg.alg},
		"scopes_supported":                      []string{"openid", "email"},
		"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", "nonce", "email", "email_verified", "name"},
	})
}

func (p *Provider) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	b, err := p.JWKS()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func (p *Provider) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	req, err := authRequest(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.ClientID != p.cfg.clientID {
		http.Error(w, fmt.Sprintf("oidctest: unknown client_id %q", req.ClientID), http.StatusBadRequest)
		return
	}
	who := p.currentSignIn()
	if who == nil {
		http.Error(w, "oidctest: nobody is signed in to the test provider (SetSignIn)", http.StatusForbidden)
		return
	}
	tok, err := p.Sign(Claims{Email: who.Email, EmailVerified: who.EmailVerified, Name: who.Name, Nonce: req.Nonce})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	switch {
	case req.ResponseMode == "form_post" && req.RedirectURI != "":
		p.formPost(w, req.RedirectURI, req.State, tok, who)
	case who.CallbackURL != "" && acceptsHTML(r):
		p.formPost(w, who.CallbackURL, req.State, tok, who)
	case who.CallbackURL != "":
		p.deliver(w, r, who.CallbackURL, req.State, tok)
	case req.RedirectURI != "":
		frag := url.Values{"id_token": {tok}, "state": {req.State}}
		http.Redirect(w, r, req.RedirectURI+"#"+frag.Encode(), http.StatusFound)
	default:
		writeJSON(w, http.StatusOK, map[string]string{"state": req.State, "id_token": tok})
	}
}

var formPostPage = template.Must(template.New("form").Parse(`<!doctype html>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>Test sign-in</title>
<body{{if .Auto}} onload="document.forms[0].submit()"{{end}}>
<form method="post" action="{{.Action}}">
<input type="hidden" name="state" value="{{.State}}">
<input type="hidden" name="id_token" value="{{.IDToken}}">
<p>Test OpenID provider: sign in as {{.Email}}.</p>
<button type="submit">Continue</button>
</form>
`))

// formPost answers the OpenID form_post response mode: a page whose form
// posts state and id_token to redirect_uri.
func (p *Provider) formPost(w http.ResponseWriter, redirectURI, state, tok string, who *SignIn) {
	u, err := url.Parse(redirectURI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		http.Error(w, "oidctest: redirect_uri must be an absolute http(s) URL", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	_ = formPostPage.Execute(w, map[string]any{"Action": u.String(), "State": state, "IDToken": tok, "Email": who.Email, "Auto": who.AutoSubmit})
}

// acceptsHTML reports whether r is a browser's navigation: its Accept
// names text/html.
func acceptsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/html") {
			return true
		}
	}
	return false
}

// FormPost reads the form-post page: where it posts, and its fields.
func FormPost(page string) (action string, fields url.Values, err error) {
	m := formAction.FindStringSubmatch(page)
	if m == nil {
		return "", nil, errors.New("oidctest: no form in the page")
	}
	fields = url.Values{}
	for _, f := range formField.FindAllStringSubmatch(page, -1) {
		fields.Set(html.UnescapeString(f[1]), html.UnescapeString(f[2]))
	}
	return html.UnescapeString(m[1]), fields, nil
}

var (
	formAction = regexp.MustCompile(`<form method="post" action="([^"]*)">`)
	formField  = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
)

// deliver posts the token to the callback as the browser page would, and
// answers with the callback's status and body so the outcome is visible.
func (p *Provider) deliver(w http.ResponseWriter, r *http.Request, callback, state, tok string) {
	body, _ := json.Marshal(map[string]string{"state": state, "id_token": tok})
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, callback, bytes.NewReader(body))
	if err != nil {
		http.Error(w, "oidctest: callback url: "+err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.cfg.client.Do(req)
	if err != nil {
		http.Error(w, "oidctest: callback: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}
