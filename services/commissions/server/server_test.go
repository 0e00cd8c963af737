package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/deploy/devstack/seed"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	"github.com/svc-dev/svc/services/commissions/internal/replica/consumer"
	"github.com/svc-dev/svc/services/commissions/server"
)

func count(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// The skeleton in the stack: it starts with the others, answers the
// platform's routes, and its catalog replica has every program and key the
// sync barrier (which now waits for commissions too) says were written.
func TestCommissionsKeepsACatalogReplicaBehindTheBarrier(t *testing.T) {
	t.Parallel()
	st := stacktest.Start(t, nil)
	c := st.Instance(server.Name)
	if c == nil {
		t.Fatal("commissions is not part of the stack")
	}
	base := "http://" + c.Addr()
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}

	a := &seed.Client{BaseURL: "http://" + st.Instance(accounts.Name).Addr(), AdminToken: stacktest.AdminToken, HTTP: http.DefaultClient}
	ctx := context.Background()
	var adv, prog, key struct {
		ID int64 `json:"id"`
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Call(ctx, "POST", "/admin/v1/advertisers", map[string]any{"name": "Money Brand", "email": "money@brand.example"}, &adv))
	must(a.Call(ctx, "POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv.ID, "name": "P", "domain": "brand.example",
		"commission_type": "percent", "commission_rate": 12.5, "duration_months": 6, "hold_days": 14}, &prog))
	must(a.Call(ctx, "POST", fmt.Sprintf("/admin/v1/programs/%d/keys", prog.ID), map[string]any{"test": false}, &key))
	must(a.Call(ctx, "PATCH", fmt.Sprintf("/admin/v1/programs/%d", prog.ID), map[string]any{"commission_rate": 15}, nil))
	// The program's currency and lead reward reach the replica: set on
	// create, changed by a patch, defaults (USD, 0) when never sent.
	var vnd, eur struct {
		ID int64 `json:"id"`
	}
	must(a.Call(ctx, "POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv.ID, "name": "Dong", "domain": "brand.example",
		"commission_type": "fixed", "commission_rate": 50000, "currency": "VND", "lead_commission": 20000}, &vnd))
	must(a.Call(ctx, "PATCH", fmt.Sprintf("/admin/v1/programs/%d", vnd.ID), map[string]any{"lead_commission": 25000}, nil))
	must(a.Call(ctx, "POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv.ID, "name": "Euro", "domain": "brand.example",
		"commission_type": "recurring_fixed", "commission_rate": 9.99, "currency": "EUR", "lead_commission": 1.25}, &eur))
	must(a.Sync(ctx, 30*time.Second))

	pool := c.Platform().Pool
	if n := count(t, pool, `SELECT count(*) FROM programs WHERE id = $1 AND commission_type = 'percent' AND commission_rate::numeric = 15 AND duration_months = 6 AND hold_days = 14`, prog.ID); n != 1 {
		var rate string
		_ = pool.QueryRow(context.Background(), `SELECT commission_rate FROM programs WHERE id = $1`, prog.ID).Scan(&rate)
		t.Fatalf("program %d not in commissions' replica as last written (rate %q)", prog.ID, rate)
	}
	for _, want := range []struct {
		id             int64
		currency, lead string
	}{{prog.ID, "USD", "0"}, {vnd.ID, "VND", "25000"}, {eur.ID, "EUR", "1.25"}} {
		var currency, lead string
		if err := pool.QueryRow(ctx, `SELECT currency, lead_commission FROM programs WHERE id = $1`, want.id).Scan(&currency, &lead); err != nil {
			t.Fatalf("program %d: %v", want.id, err)
		}
		if currency != want.currency || lead != want.lead {
			t.Fatalf("program %d in the replica: currency %q lead_commission %q, want %q %q", want.id, currency, lead, want.currency, want.lead)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM api_keys WHERE id = $1 AND program_id = $2 AND NOT test`, key.ID, prog.ID); n != 1 {
		t.Fatalf("key %d not in commissions' replica", key.ID)
	}
	if n := count(t, pool, `SELECT watermark FROM catalog_progress ORDER BY updated_at DESC LIMIT 1`); int64(n) != a.Seq() {
		t.Fatalf("watermark %d, want %d", n, a.Seq())
	}
	// An older snapshot (a redelivery, or another partition's late event)
	// never overwrites a newer one.
	stale, err := proto.Marshal(&eventsv1.Program{Id: prog.ID, CommissionType: "fixed", CommissionRate: "1", UpdatedAt: timestamppb.Now()})
	if err != nil {
		t.Fatal(err)
	}
	err = pg.InTx(context.Background(), pool, func(tx pgx.Tx) error {
		return consumer.Applier{Service: server.Name, Now: time.Now}.Apply(context.Background(), tx, &eventsv1.Envelope{
			Id: "stale", Type: eventsv1.TypeProgramUpserted, Seq: 1, Payload: stale,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM programs WHERE id = $1 AND commission_rate::numeric = 15`, prog.ID); n != 1 {
		t.Fatal("an older catalog event overwrote the program")
	}
	// An event published before accounts sent currency and lead_commission
	// (both empty) means what such a program meant then: USD, no lead
	// reward. (Another epoch, so the watermark checked above is untouched.)
	const oldID = 1 << 40
	old, err := proto.Marshal(&eventsv1.Program{Id: oldID, AdvertiserId: adv.ID, CommissionType: "fixed", CommissionRate: "5", UpdatedAt: timestamppb.Now()})
	if err != nil {
		t.Fatal(err)
	}
	err = pg.InTx(context.Background(), pool, func(tx pgx.Tx) error {
		return consumer.Applier{Service: server.Name, Now: time.Now}.Apply(context.Background(), tx, &eventsv1.Envelope{
			Id: "before-currency", Type: eventsv1.TypeProgramUpserted, Epoch: "before-currency", Seq: 1, Payload: old,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM programs WHERE id = $1 AND currency = 'USD' AND lead_commission = '0'`, int64(oldID)); n != 1 {
		t.Fatal("an event without currency and lead_commission did not get USD and 0")
	}
}
