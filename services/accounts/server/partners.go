package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	catalogpg "github.com/svc-dev/svc/services/accounts/internal/catalog/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/partners"
	partnerendpoints "github.com/svc-dev/svc/services/accounts/internal/partners/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/partners/figuresclient"
	partnerhttpapi "github.com/svc-dev/svc/services/accounts/internal/partners/httpapi"
	partnerstore "github.com/svc-dev/svc/services/accounts/internal/partners/pgstore"
)

// appendPartners adds the console's partner and link changes to routes,
// behind the dashboard session checker and a limiter of their own at the
// settings routes' rate (SETTINGS_RATE_LIMIT a minute per session token).
func appendPartners(routes []platform.Route, p *platform.Platform, cfg Config, cat catalog.Service, sessions *session.Checker,
	trace obs.EndpointMiddleware, failedAuth func(http.Handler) http.Handler, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	authz, err := identity.NewAuthorizer(idstore.New(p.Pool))
	if err != nil {
		return nil, err
	}
	pc := partners.Config{Access: authz, Catalog: cat, Store: catalogpg.New(p.Pool, p.Now), Lister: partnerstore.New(p.Pool)}
	switch {
	case cfg.AnalyticsURL == "":
		p.Logger.Info("no ANALYTICS_URL: the console's partners list answers without figures")
	case cfg.InternalToken == "":
		p.Logger.Warn("ANALYTICS_URL is set but INTERNAL_TOKEN is not: the console's partners list answers without figures")
	default:
		hc := &http.Client{Timeout: figuresclient.DefaultTimeout, Transport: otelhttp.NewTransport(http.DefaultTransport,
			otelhttp.WithTracerProvider(p.Tracer), otelhttp.WithPropagators(p.Propagator))}
		c, err := figuresclient.New(cfg.AnalyticsURL, cfg.InternalToken, hc)
		if err != nil {
			return nil, fmt.Errorf("ANALYTICS_URL: %w", err)
		}
		pc.Figures = loggedFigures{src: c, logger: p.Logger}
	}
	svc, err := partners.NewService(pc)
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	limit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("program_partners"), ratelimit.WithOnRefuse(refusals.Inc))
	return append(routes, partnerhttpapi.Routes(partnerendpoints.New(svc, trace), partnerhttpapi.Config{
		Sessions: sessions, Logger: p.Logger, Limit: limit, FailedAuth: failedAuth,
	})...), nil
}

// loggedFigures logs why figures are missing: the list answers without
// them, so the failure would otherwise go unseen.
type loggedFigures struct {
	src    partners.FiguresSource
	logger *slog.Logger
}

func (l loggedFigures) PartnerFigures(ctx context.Context, programID int64, ids []int64) (map[int64]partners.Figures, partners.Window, error) {
	f, w, err := l.src.PartnerFigures(ctx, programID, ids)
	if err != nil {
		l.logger.WarnContext(ctx, "partners list without figures", "program_id", programID, "err", err)
	}
	return f, w, err
}
