package server

import (
	"fmt"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/apikeys"
	keyconsumer "github.com/svc-dev/svc/services/accounts/internal/apikeys/consumer"
	keyendpoints "github.com/svc-dev/svc/services/accounts/internal/apikeys/endpoints"
	keyhttpapi "github.com/svc-dev/svc/services/accounts/internal/apikeys/httpapi"
	keystore "github.com/svc-dev/svc/services/accounts/internal/apikeys/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
)

// wireKeys builds the console's program API key routes (behind their own
// 30-a-minute limiter per sign-in token, as the settings routes, and the
// same dashboard session checker) and the consumer of the keys' last-use
// reports.
func wireKeys(p *platform.Platform, cfg Config, cat catalog.Service, checker *session.Checker, trace obs.EndpointMiddleware,
	failedAuth func(http.Handler) http.Handler, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	if err := p.Consume(eventsv1.TopicAPIKeyUsed, keyconsumer.Group, keyconsumer.Handler(keystore.RecordUse)); err != nil {
		return nil, err
	}
	authz, err := identity.NewAuthorizer(idstore.New(p.Pool))
	if err != nil {
		return nil, err
	}
	// A revocation waits for the replicas as long as a sign-out does.
	svc, err := apikeys.NewService(apikeys.Config{Access: authz, Catalog: cat, Now: p.Now, PropagationTimeout: cfg.SignOutSyncTimeout})
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	limit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("program_keys"), ratelimit.WithOnRefuse(refusals.Inc))
	return keyhttpapi.Routes(keyendpoints.New(svc, trace), keyhttpapi.Config{Sessions: checker, Logger: p.Logger, Limit: limit, FailedAuth: failedAuth}), nil
}
