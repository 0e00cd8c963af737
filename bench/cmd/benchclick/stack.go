package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/svc-dev/svc/bench/internal/rig"
	demoseed "github.com/svc-dev/svc/deploy/devstack/seed"
)

// startStack starts, on a fresh database and an in-process broker, the
// click route's service (tracking) and accounts for the seed, as the README
// says, behind the gateway, with pools of dbMaxConns: commissions' and
// analytics' consumers of the clicks would spend the same cores and the
// same Postgres on the run.
func startStack(ctx context.Context, adminDSN string, logs io.Writer, logLevel string, dbMaxConns int) (_ *rig.Stack, err error) {
	st, err := rig.Open(ctx, adminDSN, "benchclick")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	env := st.Env(map[string]string{
		"LOG_LEVEL":    logLevel,
		"DB_MAX_CONNS": strconv.Itoa(dbMaxConns),
		// The seed writes a few hundred catalog rows in a burst; the
		// default admin limit (1200/min) would be enough, but a repeated
		// run in the same minute must not trip it.
		"ADMIN_RATE_LIMIT": "100000",
	})
	if err := st.Start(ctx, []string{"tracking", "accounts"}, env, logs); err != nil {
		return nil, err
	}
	return st, nil
}

// catalog is what the seed created for the benchmark.
type catalog struct {
	ProgramID int64
	Codes     []string
	Seq       int64
}

// seedCatalog creates one browser-allowed program whose allowed origins
// include origin, partners approved partners and links referral links spread
// evenly over them, then waits on the catalog sync barrier so tracking's
// replica has every link before the first click.
func seedCatalog(ctx context.Context, a *demoseed.Client, origin string, partners, links int) (catalog, error) {
	var id struct {
		ID int64 `json:"id"`
	}
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/advertisers", map[string]any{"name": "Bench Brand", "email": "owner@bench-brand.example"}, &id); err != nil {
		return catalog{}, err
	}
	prog := map[string]any{
		"advertiser_id":         id.ID,
		"name":                  "Bench Program",
		"domain":                "bench-brand.example",
		"commission_type":       "percent",
		"commission_rate":       20,
		"cookie_duration":       30,
		"lead_auth_policy":      "browser_allowed",
		"allowed_origins":       []string{origin},
		"duration_months":       12,
		"payment_tracking_mode": "s2s",
	}
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/programs", prog, &id); err != nil {
		return catalog{}, err
	}
	c := catalog{ProgramID: id.ID}
	pp := "/admin/v1/programs/" + strconv.FormatInt(c.ProgramID, 10)
	partnerIDs := make([]int64, partners)
	for i := range partnerIDs {
		body := map[string]any{"name": fmt.Sprintf("Partner %02d", i+1), "email": fmt.Sprintf("partner%02d@bench-brand.example", i+1)}
		if err := a.Call(ctx, http.MethodPost, "/admin/v1/partners", body, &id); err != nil {
			return catalog{}, err
		}
		partnerIDs[i] = id.ID
		if err := a.Call(ctx, http.MethodPost, pp+"/partners", map[string]any{"partner_id": id.ID, "approved": true}, nil); err != nil {
			return catalog{}, err
		}
	}
	for i := range links {
		code := fmt.Sprintf("p%02d-link%03d", i%partners+1, i+1)
		if err := a.Call(ctx, http.MethodPost, pp+"/links", map[string]any{"partner_id": partnerIDs[i%partners], "code": code, "active": true}, nil); err != nil {
			return catalog{}, err
		}
		c.Codes = append(c.Codes, code)
	}
	if err := a.Sync(ctx, 30*time.Second); err != nil {
		return catalog{}, fmt.Errorf("wait for the catalog to reach tracking: %w", err)
	}
	c.Seq = a.Seq()
	return c, nil
}
