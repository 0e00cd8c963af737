package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	"github.com/svc-dev/svc/services/commissions/internal/replica/consumer"
	"github.com/svc-dev/svc/services/commissions/server"
)

// admin calls the accounts admin API, returns data.id and remembers the
// highest X-Catalog-Seq.
type admin struct {
	t    *testing.T
	base string
	seq  int64
}

func (a *admin) call(method, path, body string) map[string]any {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+stacktest.AdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		a.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if n, err := strconv.ParseInt(resp.Header.Get("X-Catalog-Seq"), 10, 64); err == nil && n > a.seq {
		a.seq = n
	}
	var out struct {
		Data map[string]any `json:"data"`
	}
	_ = json.Unmarshal(raw, &out)
	return out.Data
}

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

	a := &admin{t: t, base: "http://" + st.Instance(accounts.Name).Addr()}
	adv := a.call("POST", "/admin/v1/advertisers", `{"name":"Money Brand","email":"money@brand.example"}`)["id"]
	prog := a.call("POST", "/admin/v1/programs", fmt.Sprintf(`{"advertiser_id":%v,"name":"P","domain":"brand.example","commission_type":"percent","commission_rate":12.5,"duration_months":6,"hold_days":14}`, adv))["id"]
	key := a.call("POST", fmt.Sprintf("/admin/v1/programs/%v/keys", prog), `{"test":false}`)["id"]
	a.call("PATCH", fmt.Sprintf("/admin/v1/programs/%v", prog), `{"commission_rate":15}`)
	a.call("GET", fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=30s", a.seq), "")

	pool := c.Platform().Pool
	if n := count(t, pool, `SELECT count(*) FROM programs WHERE id = $1 AND commission_type = 'percent' AND commission_rate::numeric = 15 AND duration_months = 6 AND hold_days = 14`, prog); n != 1 {
		var rate string
		_ = pool.QueryRow(context.Background(), `SELECT commission_rate FROM programs WHERE id = $1`, prog).Scan(&rate)
		t.Fatalf("program %v not in commissions' replica as last written (rate %q)", prog, rate)
	}
	if n := count(t, pool, `SELECT count(*) FROM api_keys WHERE id = $1 AND program_id = $2 AND NOT test`, key, prog); n != 1 {
		t.Fatalf("key %v not in commissions' replica", key)
	}
	if n := count(t, pool, `SELECT watermark FROM catalog_progress ORDER BY updated_at DESC LIMIT 1`); int64(n) != a.seq {
		t.Fatalf("watermark %d, want %d", n, a.seq)
	}
	// An older snapshot (a redelivery, or another partition's late event)
	// never overwrites a newer one.
	stale, err := proto.Marshal(&eventsv1.Program{Id: int64(prog.(float64)), CommissionType: "fixed", CommissionRate: "1", UpdatedAt: timestamppb.Now()})
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
	if n := count(t, pool, `SELECT count(*) FROM programs WHERE id = $1 AND commission_rate::numeric = 15`, prog); n != 1 {
		t.Fatal("an older catalog event overwrote the program")
	}
}
