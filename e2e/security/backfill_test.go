package security_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform"
	accounts "github.com/svc-dev/svc/services/accounts/server"
)

// A person suspended before a replica kept users' flags (analytics'
// users replica came after the flag was first published, and its
// consumer group had passed those events) kept their sessions there. A
// pod of the version that brings the backfill republishes every blocked
// user once per database, before it serves; the replica then refuses
// them like any fresh suspension.
func TestSuspensionFromBeforeTheReplicaReachesIt(t *testing.T) {
	t.Parallel()
	e := startSignIn(t, "accounts", "analytics")
	owner := person{subject: "sub-early", email: "early@brand.example"}
	tok := e.dashboardSession(owner)
	uid := e.meID(tok)
	prog := e.workspace(uid)
	e.access(tok, prog).wantOpen(t)
	ctx := context.Background()
	acc := e.Stack.Instance("accounts").Platform()
	if n := e.count("accounts", `SELECT count(*) FROM catalog_backfills WHERE name = '2026-11-blocked-users'`); n != 1 {
		t.Fatalf("the first start ran the backfill %d times", n)
	}

	// What an older version left: the flag set, no event any replica
	// applied, and no backfill recorded.
	if _, err := acc.Pool.Exec(ctx, `UPDATE users SET blocked = true WHERE id = $1`, uid); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Pool.Exec(ctx, `DELETE FROM catalog_backfills WHERE name = '2026-11-blocked-users'`); err != nil {
		t.Fatal(err)
	}
	if a := e.access(tok, prog); a.performance.Status != 200 {
		t.Fatalf("before the new pod, analytics answered %d: the replica already knew", a.performance.Status)
	}
	seqBefore := e.count("accounts", `SELECT seq::int FROM catalog_seq`)

	// A pod of this version starts beside the running one (a rolling
	// deploy), on the same database and broker.
	pod := startAccountsPod(t, acc)
	began := time.Now()
	for e.access(tok, prog).performance.Status != 403 {
		if time.Since(began) > replicaWait {
			t.Fatalf("%s after the new pod started, analytics still serves the suspended user", replicaWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("refused %s after the new pod started", time.Since(began).Round(time.Millisecond))
	if n := e.count("analytics", `SELECT count(*) FROM users WHERE id = $1 AND blocked`, uid); n != 1 {
		t.Fatalf("analytics' users replica: %d blocked rows for user %d", n, uid)
	}
	if n := e.count("accounts", `SELECT events FROM catalog_backfills WHERE name = '2026-11-blocked-users'`); n != 1 {
		t.Fatalf("the backfill recorded %d events, want the one blocked user", n)
	}
	// Once per database: a further pod publishes nothing.
	seqAfter := e.count("accounts", `SELECT seq::int FROM catalog_seq`)
	if seqAfter != seqBefore+1 {
		t.Fatalf("catalog seq %d → %d, want one event", seqBefore, seqAfter)
	}
	_ = pod.Stop()
	startAccountsPod(t, acc)
	if n := e.count("accounts", `SELECT seq::int FROM catalog_seq`); n != seqAfter {
		t.Fatalf("a third pod published again: catalog seq %d → %d", seqAfter, n)
	}
}

// startAccountsPod starts another accounts instance with the running one's
// configuration, on its own port.
func startAccountsPod(t *testing.T, running *platform.Platform) *platform.Instance {
	t.Helper()
	vars := running.Env.Values()
	vars["HTTP_ADDR"] = "127.0.0.1:0"
	if vars["OPS_HTTP_ADDR"] != "" {
		vars["OPS_HTTP_ADDR"] = "127.0.0.1:0"
	}
	inst, err := platform.Start(context.Background(), accounts.Spec(), func(k string) string { return vars[k] }, io.Discard, platform.WithClock(running.Now))
	if err != nil {
		t.Fatalf("start another accounts pod: %v", err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	return inst
}

// Commissions' console replica (memberships, blocks, sign-outs, partner
// records) came after its catalog group had passed those events: a
// membership made before it would be refused by the console's commissions
// routes. The accounts pod of this version republishes them once.
func TestMembershipFromBeforeCommissionsKeptThemReachesIt(t *testing.T) {
	t.Parallel()
	e := startSignIn(t, "commissions", "accounts")
	who := person{subject: "sub-old-member", email: "old-member@brand.example"}
	tok := e.dashboardSession(who)
	uid := e.meID(tok)
	adv := e.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Old", "email": "old@brand.example"})
	prog := e.id("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": "Old", "domain": "old.example",
		"commission_type": "percent", "commission_rate": 5})
	e.sync()
	acc := e.Stack.Instance("accounts").Platform()
	ctx := context.Background()
	// What an older version left: the membership, no event any replica
	// of it applied, and no backfill recorded.
	if _, err := acc.Pool.Exec(ctx, `INSERT INTO memberships (program_id, user_id, active, permissions) VALUES ($1, $2, true, '{tracking:read}')`, prog, uid); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Pool.Exec(ctx, `DELETE FROM catalog_backfills WHERE name = '2026-11-commissions-console-replica'`); err != nil {
		t.Fatal(err)
	}
	list := func() reply {
		return e.client("203.0.113.95").withKey(tok).do("GET", fmt.Sprintf("/api/v1/programs/%d/commissions", prog), nil)
	}
	if r := list(); r.Status != 403 {
		t.Fatalf("before the new pod, commissions answered %d %s: its replica already knew", r.Status, r.Raw)
	}
	startAccountsPod(t, acc)
	began := time.Now()
	for list().Status != 200 {
		if time.Since(began) > replicaWait {
			t.Fatalf("%s after the new pod started, commissions still refuses the member: %s", replicaWait, list().Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := e.count("commissions", `SELECT count(*) FROM memberships WHERE program_id = $1 AND user_id = $2 AND active`, prog, uid); n != 1 {
		t.Fatalf("commissions' replica: %d memberships", n)
	}
}
