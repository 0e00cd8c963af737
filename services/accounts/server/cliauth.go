package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	catalogpg "github.com/svc-dev/svc/services/accounts/internal/catalog/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
	cliendpoints "github.com/svc-dev/svc/services/accounts/internal/cliauth/endpoints"
	clihttpapi "github.com/svc-dev/svc/services/accounts/internal/cliauth/httpapi"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth/oidcverify"
	clistore "github.com/svc-dev/svc/services/accounts/internal/cliauth/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/dashauth"
	dashendpoints "github.com/svc-dev/svc/services/accounts/internal/dashauth/endpoints"
	dashhttpapi "github.com/svc-dev/svc/services/accounts/internal/dashauth/httpapi"
	dashstore "github.com/svc-dev/svc/services/accounts/internal/dashauth/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/sessions"
	sessionsendpoints "github.com/svc-dev/svc/services/accounts/internal/sessions/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/settings"
	settingsendpoints "github.com/svc-dev/svc/services/accounts/internal/settings/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
	"github.com/svc-dev/svc/services/accounts/internal/signup"
)

// discoveryTimeout bounds the fetch of the discovery document at start, so
// an unreachable provider delays the start by at most this much.
const discoveryTimeout = 5 * time.Second

// discoverOIDC fills what the configuration leaves to the provider: the
// sign-in link's base (authorization_endpoint) when OIDC_AUTH_URL is unset,
// and the keys (jwks_uri) when neither OIDC_JWKS_URL nor OIDC_JWKS_FILE is.
// Nothing is fetched when both are configured.
//
// The discovery document is read with go-oidc's NewProvider, which refuses
// a document whose issuer differs from OIDC_ISSUER (the id_tokens would
// not verify either). When discovery fails the service still starts: the
// link falls back to {OIDC_ISSUER}/authorize, the most common place, and a
// warning names the error and the URL used. Keys cannot be guessed, so
// without a JWKS setting a failed discovery stops the start.
func discoverOIDC(ctx context.Context, logger *slog.Logger, e *OIDCConfig) error {
	needKeys := e.JWKSURL == "" && e.JWKSFile == ""
	if e.AuthURL != "" && !needKeys {
		return nil
	}
	found, err := discover(ctx, e.Issuer)
	if needKeys {
		if err == nil && found.jwksURL == "" {
			err = errors.New("the discovery document has no jwks_uri")
		}
		if err != nil {
			return fmt.Errorf("%w (none set, and discovery at %s gave no keys: %v)", errJWKSChoice, e.Issuer, err)
		}
		e.JWKSURL = found.jwksURL
		logger.Info("oidc keys from the discovery document", "jwks_url", e.JWKSURL)
	}
	if e.AuthURL != "" {
		return nil
	}
	if err == nil && found.authURL == "" {
		err = errors.New("the discovery document has no usable authorization_endpoint")
	}
	if err != nil {
		e.AuthURL = strings.TrimRight(e.Issuer, "/") + "/authorize"
		logger.Warn("oidc discovery failed; the sign-in link uses the issuer's /authorize (set OIDC_AUTH_URL if that is wrong)",
			"issuer", e.Issuer, "auth_url", e.AuthURL, "err", err)
		return nil
	}
	e.AuthURL = found.authURL
	logger.Info("oidc sign-in url from the discovery document", "auth_url", e.AuthURL)
	return nil
}

type discovered struct{ authURL, jwksURL string }

// discover reads {issuer}/.well-known/openid-configuration. An endpoint that
// is not an absolute http(s) URL is left out, as if absent.
func discover(ctx context.Context, issuer string) (discovered, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	prov, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return discovered{}, err
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := prov.Claims(&doc); err != nil {
		return discovered{}, err
	}
	return discovered{authURL: absoluteHTTP(prov.Endpoint().AuthURL), jwksURL: absoluteHTTP(doc.JWKSURI)}, nil
}

func absoluteHTTP(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return raw
}

// wireCLIAuth builds the command-line sign-in, init and programs routes
// (behind the shared CLI limiter) and the program settings routes (behind
// their own 30-a-minute limiter per sign-in token).
func wireCLIAuth(ctx context.Context, p *platform.Platform, cfg Config, cat catalog.Service, priv ed25519.PrivateKey, issuer *session.Issuer, trace obs.EndpointMiddleware,
	cli cliLimits, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	oenv := cfg.OIDC // discovery fills what the configuration leaves out
	var verifier cliauth.IDTokenVerifier
	if oenv.Enabled {
		if err := discoverOIDC(ctx, p.Logger, &oenv); err != nil {
			return nil, err
		}
		v, err := oidcverify.New(ctx, oidcverify.Config{
			Issuer: oenv.Issuer, Audience: oenv.Audience, JWKSURL: oenv.JWKSURL, JWKSFile: oenv.JWKSFile,
			Algorithms: oenv.Algorithms, Now: p.Now,
		})
		if err != nil {
			return nil, err
		}
		verifier = v
	} else {
		p.Logger.Warn("command-line sign-in is off: OIDC_ISSUER, OIDC_AUDIENCE, OIDC_AUTH_URL and OIDC_JWKS_URL or OIDC_JWKS_FILE are unset")
	}
	store := clistore.New(p.Pool)
	svc, err := cliauth.NewService(cliauth.Config{
		Store: store, Catalog: cat, Verifier: verifier,
		AuthURL: oenv.AuthURL, ClientID: oenv.Audience, RedirectURL: cfg.CLILoginRedirectURL,
		Now: p.Now, TokenTTL: cfg.CLITokenTTL,
	})
	if err != nil {
		return nil, err
	}
	routes := clihttpapi.Routes(cliendpoints.New(svc, trace), clihttpapi.Config{Service: svc, Logger: p.Logger,
		Limit: cli.byIP, TokenLimit: cli.byToken, FailedAuth: cli.failedAuth})

	pub, ok := priv.Public().(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("SESSION_SIGNING_KEY: no Ed25519 public key")
	}
	sessionVerifier, err := session.NewVerifier(pub, SessionIssuer, p.Now)
	if err != nil {
		return nil, fmt.Errorf("session verifier: %w", err)
	}
	// Sessions end early (sign-out) through the catalog, which accounts
	// checks itself and replicates to the other services.
	sessSvc, err := sessions.NewService(sessions.Config{Catalog: cat, Tokens: sessionVerifier, Now: p.Now, PropagationTimeout: cfg.SignOutSyncTimeout})
	if err != nil {
		return nil, err
	}
	checker, err := session.NewChecker(sessionVerifier, session.KindDashboard, sessSvc)
	if err != nil {
		return nil, err
	}
	// One permission check for every dashboard route.
	authz, err := identity.NewAuthorizer(idstore.New(p.Pool))
	if err != nil {
		return nil, err
	}
	settingsSvc, err := settings.NewService(authz, cat)
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	limit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("program_settings"), ratelimit.WithOnRefuse(refusals.Inc))
	routes = append(routes, settingshttpapi.Routes(settingsendpoints.New(settingsSvc, trace), settingshttpapi.Config{Sessions: checker, Logger: p.Logger, Limit: limit, FailedAuth: cli.failedAuth})...)

	// The console's programs: see programs.go.
	progRoutes, err := wirePrograms(p, cfg, cat, checker, trace, cli.failedAuth, refusals)
	if err != nil {
		return nil, err
	}
	routes = append(routes, progRoutes...)

	// The console's program API keys: see keys.go.
	keyRoutes, err := wireKeys(p, cfg, cat, checker, trace, cli.failedAuth, refusals)
	if err != nil {
		return nil, err
	}
	routes = append(routes, keyRoutes...)

	// The console's partner and link changes: see partners.go.
	if routes, err = appendPartners(routes, p, cfg, cat, checker, trace, cli.failedAuth, refusals); err != nil {
		return nil, err
	}

	// The console's team: see members.go.
	if routes, err = appendMembers(routes, p, cfg, cat, checker, trace, cli.failedAuth, refusals); err != nil {
		return nil, err
	}

	// The console's payment processor connection: see processorconnect.go.
	if routes, err = appendProcessorConnect(routes, p, cfg, cat, checker, trace, cli, refusals); err != nil {
		return nil, err
	}

	dash, err := wireDashAuth(p, cfg, oenv, svc, verifier != nil, issuer, checker, sessionsendpoints.New(sessSvc, trace), trace, cli, refusals)
	if err != nil {
		return nil, err
	}
	routes = append(routes, cliTokenVerifyRoute(svc, cfg.InternalToken, p.Logger))
	return append(routes, dash...), nil
}

// dashIssuer issues dashboard-kind session tokens.
type dashIssuer struct{ *session.Issuer }

func (d dashIssuer) IssueDashboard(userID int64) (string, time.Time, error) {
	return d.Issue(userID, session.KindDashboard)
}

// dashIdentifier is the dashboard's identity check: the command-line
// sign-in's, with the dashboard's sign-up rule for newcomers.
type dashIdentifier struct {
	cli       cliauth.Service
	newcomers identity.Newcomers
}

func (d dashIdentifier) Identify(ctx context.Context, idToken, nonce string) (catalog.User, error) {
	return d.cli.IdentifyWith(ctx, idToken, nonce, d.newcomers)
}

// wireDashAuth builds the dashboard's browser sign-in over the same OpenID
// provider and id_token check as the command-line sign-in (cliauth's
// Identify), and the signed-in user's program list. Without a provider or
// PUBLIC_URL the sign-in routes answer 503; me works for any session.
func wireDashAuth(p *platform.Platform, cfg Config, oenv OIDCConfig, cli cliauth.Service, oidcOn bool, issuer *session.Issuer,
	sessions *session.Checker, signOut sessionsendpoints.Set, trace obs.EndpointMiddleware, limits cliLimits, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	dcfg := dashauth.Config{
		Store: dashstore.New(p.Pool), Tokens: dashIssuer{issuer}, Now: p.Now, DashboardPath: cfg.DashboardURL,
	}
	// The dashboard's newcomers follow SIGNUP; the workspace writes are
	// the catalog store's (one transaction, its events).
	newcomers, err := signup.New(cfg.Signup, catalogpg.New(p.Pool, p.Now))
	if err != nil {
		return nil, err
	}
	switch {
	case oidcOn && cfg.PublicURL != "":
		dcfg.Identifier = dashIdentifier{cli: cli, newcomers: newcomers}
		dcfg.AuthURL, dcfg.ClientID, dcfg.CallbackURL = oenv.AuthURL, oenv.Audience, cfg.PublicURL+dashhttpapi.PathCallback
	case oidcOn:
		p.Logger.Warn("dashboard sign-in is off: PUBLIC_URL is unset (the provider needs the callback's address)")
	}
	svc, err := dashauth.NewService(dcfg)
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	tokenLimit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("dashboard_me"), ratelimit.WithOnRefuse(refusals.Inc))
	return dashhttpapi.Routes(dashendpoints.New(svc, trace), dashhttpapi.Config{
		Sessions: sessions, SignOut: signOut.SignOut, Logger: p.Logger, Limit: limits.byIP, TokenLimit: tokenLimit, FailedAuth: limits.failedAuth,
	}), nil
}
