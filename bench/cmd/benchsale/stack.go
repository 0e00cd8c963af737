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

// benchRateLimit replaces the per-minute limits of the routes the benchmark
// drives: the sale+refund limit (120/min per API key, one bucket for both)
// would otherwise answer 429 after the first two seconds.
const benchRateLimit = "100000000"

var rateLimitEnv = []string{
	"TRACK_SALE_RATE_LIMIT",  // sale + refund per API key (tracking and commissions read the same name)
	"TRACK_CLICK_RATE_LIMIT", // customer creation (not timed); each click also comes from its own address
	"ADMIN_RATE_LIMIT",       // the seed; a repeated run in the same minute
}

// startStack starts, on a fresh database and an in-process broker, the
// services a sale and a refund go through, and accounts for the seed,
// behind the gateway, with pools of dbMaxConns. Not analytics: a consumer
// of the ledger, it would spend the same two cores counting every sale
// and commission, measuring its consumers instead of the routes (the sale
// runs of before analytics had these three only).
func startStack(ctx context.Context, adminDSN string, logs io.Writer, logLevel string, dbMaxConns int) (_ *rig.Stack, err error) {
	st, err := rig.Open(ctx, adminDSN, "benchsale")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	env := map[string]string{"LOG_LEVEL": logLevel, "DB_MAX_CONNS": strconv.Itoa(dbMaxConns)}
	for _, k := range rateLimitEnv {
		env[k] = benchRateLimit
	}
	if err := st.Start(ctx, []string{"tracking", "commissions", "accounts"}, st.Env(env), logs); err != nil {
		return nil, err
	}
	return st, nil
}

// catalog is what the seed created for the benchmark.
type catalog struct {
	ProgramID int64
	Codes     []string // one referral link per partner
	APIKey    string   // the program's live API key (never printed)
	Seq       int64
}

// seedCatalog creates an advertiser, a program paying 10 % with no hold,
// partners approved partners with one referral link each and a live
// program API key, then waits on the catalog sync barrier so tracking's and
// commissions' replicas know the links and the key before the first
// request.
func seedCatalog(ctx context.Context, a *demoseed.Client, partners, holdDays int) (catalog, error) {
	var id struct {
		ID int64 `json:"id"`
	}
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/advertisers", map[string]any{"name": "Bench Brand", "email": "owner@bench-brand.example"}, &id); err != nil {
		return catalog{}, err
	}
	prog := map[string]any{
		"advertiser_id":         id.ID,
		"name":                  "Bench Sale Program",
		"domain":                "brand.example",
		"commission_type":       "percent",
		"commission_rate":       10,
		"hold_days":             holdDays,
		"cookie_duration":       30,
		"duration_months":       12,
		"payment_tracking_mode": "s2s",
	}
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/programs", prog, &id); err != nil {
		return catalog{}, err
	}
	c := catalog{ProgramID: id.ID}
	pp := "/admin/v1/programs/" + strconv.FormatInt(c.ProgramID, 10)
	for i := range partners {
		body := map[string]any{"name": fmt.Sprintf("Bench Partner %02d", i+1), "email": fmt.Sprintf("partner%02d@bench-brand.example", i+1)}
		if err := a.Call(ctx, http.MethodPost, "/admin/v1/partners", body, &id); err != nil {
			return catalog{}, err
		}
		if err := a.Call(ctx, http.MethodPost, pp+"/partners", map[string]any{"partner_id": id.ID, "approved": true}, nil); err != nil {
			return catalog{}, err
		}
		code := fmt.Sprintf("benchsale%02d", i+1)
		if err := a.Call(ctx, http.MethodPost, pp+"/links", map[string]any{"partner_id": id.ID, "code": code, "active": true}, nil); err != nil {
			return catalog{}, err
		}
		c.Codes = append(c.Codes, code)
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := a.Call(ctx, http.MethodPost, pp+"/keys", map[string]any{"test": false}, &key); err != nil {
		return catalog{}, err
	}
	if key.Key == "" {
		return catalog{}, fmt.Errorf("POST %s/keys: no key in the answer", pp)
	}
	c.APIKey = key.Key
	if err := a.Sync(ctx, 30*time.Second); err != nil {
		return catalog{}, fmt.Errorf("wait for the catalog to reach the replicas: %w", err)
	}
	c.Seq = a.Seq()
	return c, nil
}
