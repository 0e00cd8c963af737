package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/webhooks/internal/accountsclient"
	"github.com/svc-dev/svc/services/webhooks/internal/listen"
	"github.com/svc-dev/svc/services/webhooks/internal/listen/endpoints"
	"github.com/svc-dev/svc/services/webhooks/internal/listen/httpapi"
	"github.com/svc-dev/svc/services/webhooks/internal/listen/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
)

// ListenRateLimit is `svc listen`'s requests per minute per token, its
// three routes together. Higher than the console's SETTINGS_RATE_LIMIT: a
// poll answers as soon as one event is written, so a busy program's
// listener polls up to about once a second (the CLI waits out a 429's
// Retry-After and carries on from where it was).
const ListenRateLimit = 120

// wireListen builds `svc listen`'s routes: CLI login tokens verified with
// accounts' public key and the replica's revocations (as the console's
// dashboard sessions), or program API keys from the replica's api_keys
// (cached as commissions caches them); limited per token, failed
// authentications per client IP. Without WEBHOOKS_SECRET_KEY a start
// answers 503. The routes are appended to routes.
func wireListen(p *platform.Platform, cfg Config, routes *[]platform.Route) error {
	store := pgstore.New(p.Pool)
	var logins *session.Checker
	if cfg.SessionPublicKey != "" {
		pub, err := session.ParsePublicKey(cfg.SessionPublicKey)
		if err != nil {
			return fmt.Errorf("SESSION_PUBLIC_KEY: %w", err)
		}
		v, err := session.NewVerifier(pub, SessionIssuer, p.Now)
		if err != nil {
			return err
		}
		if logins, err = session.NewChecker(v, session.KindCLI, store); err != nil {
			return err
		}
	}
	opaque, err := accountsVerifier(p, cfg)
	if err != nil {
		return err
	}
	var box *secret.Box
	if cfg.SecretKey != "" {
		key, err := secret.ParseKey(cfg.SecretKey)
		if err != nil {
			return fmt.Errorf("WEBHOOKS_SECRET_KEY: %w", err)
		}
		if box, err = secret.NewBox(key); err != nil {
			return err
		}
	}
	svc, err := listen.New(listen.Config{Store: store, Box: box, Now: p.Now})
	if err != nil {
		return err
	}
	keys, err := catalogsync.NewKeys(p.Pool, p.Config.Schema, p.Logger)
	if err != nil {
		return err
	}
	p.AddRunner(keys.Run)
	limiter, err := ratelimit.New(ratelimit.Config{Limit: ListenRateLimit, Now: p.Now})
	if err != nil {
		return err
	}
	refusals, err := ratelimit.NewRefusalCounter(p.Registry)
	if err != nil {
		return err
	}
	failedLimiter, err := ratelimit.New(ratelimit.Config{Limit: failedAuthPerMinute, Now: p.Now})
	if err != nil {
		return err
	}
	tracing := obs.Tracing(p.Tracer.Tracer("svc/" + p.Name))
	*routes = append(*routes, httpapi.Routes(endpoints.New(svc, tracing), httpapi.Config{
		Logins:       logins,
		OpaqueLogins: opaque,
		Keys:         &apikey.Authenticator{Store: keys, Now: p.Now},
		Logger:       p.Logger,
		Limit:        ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("webhooks_listen"), ratelimit.WithOnRefuse(refusals.Inc)),
		FailedAuth: ratelimit.FailedAuth(failedLimiter, ratelimit.ByIP(p.IPs), ratelimit.WithRoute("webhooks_listen_failed_auth"),
			ratelimit.WithOnRefuse(refusals.Inc)),
	})...)
	return nil
}

// accountsVerifier asks accounts about opaque login tokens when both
// ACCOUNTS_URL and INTERNAL_TOKEN are set; otherwise nil (such tokens keep
// the 401 that tells the user to use the program key).
func accountsVerifier(p *platform.Platform, cfg Config) (httpapi.OpaqueVerifier, error) {
	if cfg.AccountsURL == "" || cfg.InternalToken == "" {
		p.Logger.Info("no ACCOUNTS_URL or INTERNAL_TOKEN: svc listen refuses svc login tokens (program API keys only)")
		return nil, nil
	}
	hc := &http.Client{Timeout: accountsTimeout, Transport: otelhttp.NewTransport(http.DefaultTransport)}
	c, err := accountsclient.New(cfg.AccountsURL, cfg.InternalToken, hc, p.Now)
	if err != nil {
		return nil, err
	}
	return opaqueVerifier{c: c, users: p.Pool}, nil
}

// accountsTimeout bounds a verification: the listen request waits on it.
const accountsTimeout = 3 * time.Second

// opaqueVerifier asks accounts (through its cache), then the replica
// whether the user is suspended: accounts' verdict may be a minute old, a
// suspension counts as soon as the replica has it.
type opaqueVerifier struct {
	c     *accountsclient.Client
	users catalogsync.Queryer
}

func (v opaqueVerifier) Verify(ctx context.Context, token string) (int64, error) {
	id, err := v.c.Verify(ctx, token)
	if errors.Is(err, accountsclient.ErrUnknown) {
		return 0, httpapi.ErrOpaqueUnknown
	}
	if err != nil {
		return 0, err
	}
	suspended, err := catalogsync.UserSuspended(ctx, v.users, id)
	if err != nil {
		return 0, err
	}
	if suspended {
		return 0, httpapi.ErrOpaqueUnknown
	}
	return id, nil
}
