package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/webhooks/internal/delivery"
	deliverystore "github.com/svc-dev/svc/services/webhooks/internal/delivery/pgstore"
	webhook "github.com/svc-dev/svc/services/webhooks/internal/endpoint"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/endpoints"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/httpapi"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

const issuer = "svc-accounts"

// Programs and users of the fixture: program 1 with its owner (11), a
// reader (12), an inactive member (13); program 2 with its owner (21);
// program 3 exists with no members.
const (
	progA, progB, progEmpty     = 1, 2, 3
	owner, reader, gone, owner2 = 11, 12, 13, 21
)

type fixture struct {
	t      *testing.T
	pool   *pgxpool.Pool
	clock  *platformtest.Clock
	box    *secret.Box
	srv    *httptest.Server
	tokens map[int64]string
}

// refusedHost stands for what delivery.CheckURL refuses (a private
// address): the service must answer it 400 with field url.
const refusedHost = "refused.example"

func newFixture(t *testing.T, withKey bool, limit ...func(http.Handler) http.Handler) *fixture {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pg.Migrate(ctx, dsn, "webhooks", migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "webhooks", MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, q := range []string{
		`INSERT INTO programs (id, advertiser_id, catalog_seq) VALUES (1, 100, 1), (2, 200, 1), (3, 300, 1)`,
		`INSERT INTO users (id, blocked, catalog_seq) VALUES (11, false, 1), (12, false, 1), (13, false, 1), (21, false, 1)`,
		`INSERT INTO memberships (program_id, user_id, active, permissions, catalog_seq) VALUES
			(1, 11, true, '{tracking:read,tracking:write}', 1), (1, 12, true, '{tracking:read}', 1),
			(1, 13, false, '{tracking:read,tracking:write}', 1), (2, 21, true, '{tracking:read,tracking:write}', 1)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	clock := platformtest.NewClock(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	priv, pub, err := session.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := session.ParsePrivateKey(priv)
	iss, err := session.NewIssuer(key, issuer, 30*24*time.Hour, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	store := pgstore.New(pool)
	checker, err := session.NewDashboardChecker(pub, issuer, clock.Now, store)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, pool: pool, clock: clock, tokens: map[int64]string{}}
	for _, uid := range []int64{owner, reader, gone, owner2} {
		tok, _, err := iss.Issue(uid, session.KindDashboard)
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[uid] = tok
	}
	if withKey {
		f.box, err = secret.NewBox(bytes.Repeat([]byte{7}, secret.KeySize))
		if err != nil {
			t.Fatal(err)
		}
	}
	svc, err := webhook.New(webhook.Config{Store: store, Box: f.box, Now: clock.Now, CheckURL: func(raw string) error {
		if u, _ := url.Parse(raw); u != nil && u.Hostname() == refusedHost {
			return errors.New("private address")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := httpapi.Config{Sessions: checker, Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))}
	if len(limit) > 0 {
		cfg.Limit = limit[0]
	}
	mux := http.NewServeMux()
	for _, r := range httpapi.Routes(endpoints.New(svc), cfg) {
		mux.Handle(r.Pattern, r.Handler)
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (a answer) str(keys ...string) string {
	var v any = a.body
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

func (a answer) num(keys ...string) int64 {
	var v any = a.body
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	n, _ := v.(float64)
	return int64(n)
}

// call sends body (a string as is, anything else as JSON) as user.
func (f *fixture) call(user int64, method, path string, body any) answer {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok, ok := f.tokens[user]; ok {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// on is f reporting to t (a subtest's).
func (f *fixture) on(t *testing.T) *fixture {
	c := *f
	c.t = t
	return &c
}

func (f *fixture) want(a answer, status int) answer {
	f.t.Helper()
	if a.status != status {
		f.t.Fatalf("status %d, want %d: %s", a.status, status, a.raw)
	}
	return a
}

func (f *fixture) count(q string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) create(prog int64, body map[string]any) answer {
	f.t.Helper()
	return f.want(f.call(owner, "POST", fmt.Sprintf("/api/v1/programs/%d/webhooks", prog), body), 201)
}

var valid = map[string]any{"url": "https://hooks.brand.example/svc", "events": []string{"sale.created", "commission.created"}}

func TestEndpointLifecycle(t *testing.T) {
	f := newFixture(t, true)
	base := fmt.Sprintf("/api/v1/programs/%d/webhooks", progA)

	created := f.create(progA, map[string]any{"url": "https://hooks.brand.example/svc", "events": []string{"sale.created", "click.recorded"},
		"description": "CRM", "include_test": true})
	id := created.num("data", "id")
	sec := created.str("data", "secret")
	if !strings.HasPrefix(sec, "whsec_") {
		t.Fatalf("secret %q", sec)
	}
	if raw, err := secret.Raw(sec); err != nil || len(raw) != 32 {
		t.Fatalf("secret is not 32 random bytes: %v", err)
	}
	if created.str("data", "created_at") != "2026-11-28T10:00:00Z" || created.body["data"].(map[string]any)["enabled"] != true ||
		created.body["data"].(map[string]any)["include_test"] != true || created.str("data", "description") != "CRM" {
		t.Fatalf("create answer %s", created.raw)
	}

	t.Run("the secret is stored sealed for this endpoint only", func(t *testing.T) {
		f := f.on(t)
		var sealed []byte
		if err := f.pool.QueryRow(context.Background(), `SELECT secret_sealed FROM endpoint_secrets WHERE endpoint_id = $1 AND expires_at IS NULL`, id).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(sealed, []byte(sec)) {
			t.Fatal("the secret is stored in the clear")
		}
		if got, err := f.box.Open(sealed, id); err != nil || got != sec {
			t.Fatalf("open: %q %v", got, err)
		}
		if _, err := f.box.Open(sealed, id+1); err == nil {
			t.Fatal("the sealed secret opens for another endpoint")
		}
	})

	t.Run("the list shows the endpoint without its secret, a reader may read it", func(t *testing.T) {
		f := f.on(t)
		for _, user := range []int64{owner, reader} {
			l := f.want(f.call(user, "GET", base, nil), 200)
			if strings.Contains(l.raw, sec) || strings.Contains(l.raw, `"secret"`) {
				t.Fatalf("the list shows the secret: %s", l.raw)
			}
			items := l.body["data"].([]any)
			if len(items) != 1 || items[0].(map[string]any)["id"].(float64) != float64(id) || items[0].(map[string]any)["disabled_reason"] != nil {
				t.Fatalf("list %s", l.raw)
			}
		}
	})

	t.Run("patch: disabling records it, enabling clears it and the failing streak", func(t *testing.T) {
		f := f.on(t)
		f.clock.Advance(time.Minute)
		p := f.want(f.call(owner, "PATCH", fmt.Sprintf("%s/%d", base, id), map[string]any{"enabled": false, "events": []string{"payout.paid"}}), 200)
		if p.body["data"].(map[string]any)["enabled"] != false || p.str("data", "disabled_reason") != "manual" ||
			p.str("data", "disabled_at") != "2026-11-28T10:01:00Z" || fmt.Sprint(p.body["data"].(map[string]any)["events"]) != "[payout.paid]" {
			t.Fatalf("disabled: %s", p.raw)
		}
		if _, err := f.pool.Exec(context.Background(), `UPDATE endpoints SET disabled_reason = 'failing', failing_since = $2 WHERE id = $1`, id, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		p = f.want(f.call(owner, "PATCH", fmt.Sprintf("%s/%d", base, id), map[string]any{"enabled": true, "url": "https://other.brand.example/h", "description": ""}), 200)
		d := p.body["data"].(map[string]any)
		if d["enabled"] != true || d["disabled_reason"] != nil || d["disabled_at"] != nil || d["url"] != "https://other.brand.example/h" ||
			d["description"] != "" || d["include_test"] != true {
			t.Fatalf("enabled: %s", p.raw)
		}
		if n := f.count(`SELECT count(*) FROM endpoints WHERE id = $1 AND failing_since IS NULL AND disabled_reason = ''`, id); n != 1 {
			t.Fatal("enabling kept the failing streak")
		}
	})

	t.Run("rotation: the old secret signs 24 hours more, earlier ones stop now", func(t *testing.T) {
		f := f.on(t)
		f.clock.Advance(time.Hour)
		r1 := f.want(f.call(owner, "POST", fmt.Sprintf("%s/%d/secret", base, id), nil), 200)
		s1 := r1.str("data", "secret")
		if !strings.HasPrefix(s1, "whsec_") || s1 == sec || len(r1.body["data"].(map[string]any)) != 1 {
			t.Fatalf("rotate: %s", r1.raw)
		}
		t1 := f.clock.Now()
		f.clock.Advance(time.Hour)
		r2 := f.want(f.call(owner, "POST", fmt.Sprintf("%s/%d/secret", base, id), ""), 200)
		s2 := r2.str("data", "secret")
		t2 := f.clock.Now()
		rows, err := f.pool.Query(context.Background(), `SELECT secret_sealed, expires_at FROM endpoint_secrets WHERE endpoint_id = $1 ORDER BY id`, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var sealed []byte
			var exp *time.Time
			if err := rows.Scan(&sealed, &exp); err != nil {
				t.Fatal(err)
			}
			plain, err := f.box.Open(sealed, id)
			if err != nil {
				t.Fatal(err)
			}
			e := "current"
			if exp != nil {
				e = exp.UTC().Format(time.RFC3339)
			}
			got = append(got, plain+"@"+e)
		}
		want := []string{sec + "@" + t2.Format(time.RFC3339), s1 + "@" + t2.Add(24*time.Hour).Format(time.RFC3339), s2 + "@current"}
		_ = t1
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("secrets\n got %v\nwant %v", got, want)
		}
	})

	var deliveryIDs []int64
	t.Run("test sends a ping to this endpoint only", func(t *testing.T) {
		f := f.on(t)
		other := f.create(progA, valid).num("data", "id")
		p := f.want(f.call(owner, "POST", fmt.Sprintf("%s/%d/test", base, id), nil), 202)
		eventID, did := p.str("data", "event_id"), p.num("data", "delivery_id")
		if !strings.HasPrefix(eventID, "evt_") || len(eventID) != 36 || did <= 0 {
			t.Fatalf("test: %s", p.raw)
		}
		var body []byte
		var typ, key string
		var isTest bool
		if err := f.pool.QueryRow(context.Background(), `SELECT body, type, object_key, is_test FROM events WHERE id = $1`, eventID).Scan(&body, &typ, &key, &isTest); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"id":"%s","type":"ping","created_at":"%s","program_id":1,"data":{"endpoint_id":%d}}`, eventID,
			f.clock.Now().Format("2006-01-02T15:04:05.000Z"), id)
		if string(body) != want || typ != "ping" {
			t.Fatalf("event body %s, want %s", body, want)
		}
		if n := f.count(`SELECT count(*) FROM deliveries WHERE event_id = $1`, eventID); n != 1 {
			t.Fatalf("%d deliveries of the ping", n)
		}
		if n := f.count(`SELECT count(*) FROM deliveries WHERE id = $1 AND endpoint_id = $2 AND status = 'pending' AND attempts = 0 AND next_attempt_at = $3`,
			did, id, f.clock.Now()); n != 1 {
			t.Fatal("the ping's delivery is not pending now on this endpoint")
		}
		if n := f.count(`SELECT count(*) FROM deliveries WHERE endpoint_id = $1`, other); n != 0 {
			t.Fatal("another endpoint got the ping")
		}
		deliveryIDs = append(deliveryIDs, did)
	})

	t.Run("the delivery log: newest first, by status, paged", func(t *testing.T) {
		f := f.on(t)
		// Four more pings; then the states the dispatcher would write.
		for range 4 {
			f.clock.Advance(time.Second)
			deliveryIDs = append(deliveryIDs, f.want(f.call(owner, "POST", fmt.Sprintf("%s/%d/test", base, id), nil), 202).num("data", "delivery_id"))
		}
		at := f.clock.Now()
		if _, err := f.pool.Exec(context.Background(), `UPDATE deliveries SET status = 'delivered', attempts = 1, last_status = 204, last_duration_ms = 12,
			last_attempt_at = $2, delivered_at = $2, next_attempt_at = NULL WHERE id = $1`, deliveryIDs[1], at); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pool.Exec(context.Background(), `UPDATE deliveries SET status = 'failed', attempts = 9, last_status = 500, last_error = 'HTTP 500',
			last_attempt_at = $2, next_attempt_at = NULL WHERE id = $1`, deliveryIDs[2], at); err != nil {
			t.Fatal(err)
		}
		walk := func(q string, limit int) []int64 {
			var ids []int64
			cursor := ""
			for range 20 {
				path := fmt.Sprintf("%s/%d/deliveries?limit=%d%s", base, id, limit, q)
				if cursor != "" {
					path += "&cursor=" + url.QueryEscape(cursor)
				}
				a := f.want(f.call(reader, "GET", path, nil), 200)
				for _, it := range a.body["data"].([]any) {
					ids = append(ids, int64(it.(map[string]any)["id"].(float64)))
				}
				next, _ := a.body["next_cursor"].(string)
				if next == "" {
					return ids
				}
				cursor = next
			}
			t.Fatal("the walk does not end")
			return nil
		}
		all := []int64{deliveryIDs[4], deliveryIDs[3], deliveryIDs[2], deliveryIDs[1], deliveryIDs[0]}
		for _, limit := range []int{1, 2, 5, 100} {
			if got := walk("", limit); fmt.Sprint(got) != fmt.Sprint(all) {
				t.Fatalf("limit %d: %v, want %v", limit, got, all)
			}
		}
		if got := walk("&status=pending", 2); fmt.Sprint(got) != fmt.Sprint([]int64{deliveryIDs[4], deliveryIDs[3], deliveryIDs[0]}) {
			t.Fatalf("pending: %v", got)
		}
		if got := walk("&status=failed", 2); fmt.Sprint(got) != fmt.Sprint([]int64{deliveryIDs[2]}) {
			t.Fatalf("failed: %v", got)
		}
		a := f.want(f.call(owner, "GET", fmt.Sprintf("%s/%d/deliveries?status=delivered", base, id), nil), 200)
		row := a.body["data"].([]any)[0].(map[string]any)
		if row["event_type"] != "ping" || row["attempts"] != float64(1) || row["last_status"] != float64(204) || row["last_duration_ms"] != float64(12) ||
			row["delivered_at"] == nil || row["last_error"] != nil || row["next_attempt_at"] != nil || a.body["next_cursor"] != nil {
			t.Fatalf("delivered row %s", a.raw)
		}
	})

	t.Run("retry makes a delivered or failed delivery due now, attempts kept", func(t *testing.T) {
		f := f.on(t)
		f.clock.Advance(time.Minute)
		for _, did := range []int64{deliveryIDs[1], deliveryIDs[2], deliveryIDs[0]} {
			r := f.want(f.call(owner, "POST", fmt.Sprintf("%s/%d/deliveries/%d/retry", base, id, did), nil), 202)
			if r.str("data", "status") != "pending" || r.str("data", "next_attempt_at") != f.clock.Now().Format(time.RFC3339) || r.body["data"].(map[string]any)["delivered_at"] != nil {
				t.Fatalf("retry: %s", r.raw)
			}
		}
		if n := f.count(`SELECT attempts FROM deliveries WHERE id = $1`, deliveryIDs[2]); n != 9 {
			t.Fatalf("attempts %d after retry", n)
		}
		f.want(f.call(owner, "POST", fmt.Sprintf("%s/%d/deliveries/%d/retry", base, id, 999999), nil), 404)
	})

	t.Run("delete removes the endpoint, its secrets and its deliveries", func(t *testing.T) {
		f := f.on(t)
		f.want(f.call(reader, "DELETE", fmt.Sprintf("%s/%d", base, id), nil), 403)
		r := f.call(owner, "DELETE", fmt.Sprintf("%s/%d", base, id), nil)
		if r.status != 204 || r.raw != "" {
			t.Fatalf("delete: %d %q", r.status, r.raw)
		}
		for _, q := range []string{`SELECT count(*) FROM endpoints WHERE id = $1`, `SELECT count(*) FROM endpoint_secrets WHERE endpoint_id = $1`,
			`SELECT count(*) FROM deliveries WHERE endpoint_id = $1`} {
			if n := f.count(q, id); n != 0 {
				t.Fatalf("%s: %d left", q, n)
			}
		}
		f.want(f.call(owner, "DELETE", fmt.Sprintf("%s/%d", base, id), nil), 404)
		f.want(f.call(owner, "GET", fmt.Sprintf("%s/%d/deliveries", base, id), nil), 404)
	})
}

func TestAccess(t *testing.T) {
	f := newFixture(t, true)
	a := f.create(progA, valid).num("data", "id")
	f.want(f.call(owner2, "POST", "/api/v1/programs/2/webhooks", valid), 201)
	paths := func(prog, id int64) [][3]string {
		p := fmt.Sprintf("/api/v1/programs/%d/webhooks", prog)
		one := fmt.Sprintf("%s/%d", p, id)
		return [][3]string{{"POST", p, `{"url":"https://x.example/h","events":["sale.created"]}`}, {"GET", p, ""}, {"GET", p + "/notifications", ""}, {"PATCH", one, `{"enabled":false}`},
			{"DELETE", one, ""}, {"POST", one + "/secret", ""}, {"POST", one + "/test", ""}, {"GET", one + "/deliveries", ""},
			{"POST", one + "/deliveries/1/retry", ""}}
	}
	before := f.count(`SELECT count(*) FROM endpoints`) + f.count(`SELECT count(*) FROM endpoint_secrets`) + f.count(`SELECT count(*) FROM deliveries`)
	t.Run("another tenant gets 403 on every route of program A", func(t *testing.T) {
		f := f.on(t)
		for _, c := range paths(progA, a) {
			r := f.want(f.call(owner2, c[0], c[1], c[2]), 403)
			if r.str("error", "message") != "You do not have access to this program" {
				t.Fatalf("%s %s: %s", c[0], c[1], r.raw)
			}
		}
	})
	t.Run("an inactive member gets 403", func(t *testing.T) {
		f := f.on(t)
		for _, c := range paths(progA, a) {
			f.want(f.call(gone, c[0], c[1], c[2]), 403)
		}
	})
	t.Run("a reader reads but gets 403 on every change", func(t *testing.T) {
		f := f.on(t)
		for _, c := range paths(progA, a) {
			r := f.call(reader, c[0], c[1], c[2])
			if c[0] == "GET" {
				f.want(r, 200)
				continue
			}
			f.want(r, 403)
		}
	})
	t.Run("A's endpoint through B's program id is not found", func(t *testing.T) {
		f := f.on(t)
		for _, c := range paths(progB, a)[3:] {
			f.want(f.call(owner2, c[0], c[1], c[2]), 404)
		}
	})
	t.Run("an unknown program is 404, a program without the user 403", func(t *testing.T) {
		f := f.on(t)
		for _, c := range paths(999, a) {
			r := f.want(f.call(owner, c[0], c[1], c[2]), 404)
			if r.str("error", "message") != "Program not found" {
				t.Fatal(r.raw)
			}
		}
		f.want(f.call(owner, "GET", fmt.Sprintf("/api/v1/programs/%d/webhooks", progEmpty), nil), 403)
	})
	t.Run("no session or a bad one is 401", func(t *testing.T) {
		f := f.on(t)
		f.want(f.call(0, "GET", "/api/v1/programs/1/webhooks", nil), 401)
		f.tokens[99] = "not.a.token"
		f.want(f.call(99, "GET", "/api/v1/programs/1/webhooks", nil), 401)
	})
	t.Run("a signed-out session and a suspended user are 401", func(t *testing.T) {
		f := f.on(t)
		if _, err := f.pool.Exec(context.Background(), `UPDATE users SET blocked = true WHERE id = $1`, reader); err != nil {
			t.Fatal(err)
		}
		f.want(f.call(reader, "GET", "/api/v1/programs/1/webhooks", nil), 401)
	})
	if after := f.count(`SELECT count(*) FROM endpoints`) + f.count(`SELECT count(*) FROM endpoint_secrets`) + f.count(`SELECT count(*) FROM deliveries`); after != before {
		t.Fatalf("refused requests wrote rows: %d, was %d", after, before)
	}
}

func TestValidation(t *testing.T) {
	f := newFixture(t, true)
	id := f.create(progA, valid).num("data", "id")
	base := "/api/v1/programs/1/webhooks"
	one := fmt.Sprintf("%s/%d", base, id)
	long := "https://hooks.example/" + strings.Repeat("a", 2048)
	cases := []struct {
		name, method, path, body, field string
		status                          int
	}{
		{"url missing", "POST", base, `{"events":["sale.created"]}`, "url", 400},
		{"url empty", "POST", base, `{"url":"","events":["sale.created"]}`, "url", 400},
		{"url not a string", "POST", base, `{"url":12,"events":["sale.created"]}`, "url", 400},
		{"url relative", "POST", base, `{"url":"/hooks","events":["sale.created"]}`, "url", 400},
		{"url of another scheme", "POST", base, `{"url":"ftp://x.example/h","events":["sale.created"]}`, "url", 400},
		{"url without a host", "POST", base, `{"url":"https:///h","events":["sale.created"]}`, "url", 400},
		{"url too long", "POST", base, `{"url":"` + long + `","events":["sale.created"]}`, "url", 400},
		{"url the dispatcher refuses", "POST", base, `{"url":"https://` + refusedHost + `/h","events":["sale.created"]}`, "url", 400},
		{"url with a NUL", "POST", base, `{"url":"https://x.example/\u0000","events":["sale.created"]}`, "url", 400},
		{"events missing", "POST", base, `{"url":"https://x.example/h"}`, "events", 400},
		{"events empty", "POST", base, `{"url":"https://x.example/h","events":[]}`, "events", 400},
		{"events not an array", "POST", base, `{"url":"https://x.example/h","events":"sale.created"}`, "events", 400},
		{"events with a number", "POST", base, `{"url":"https://x.example/h","events":[1]}`, "events", 400},
		{"events with an unknown type", "POST", base, `{"url":"https://x.example/h","events":["sale.deleted"]}`, "events", 400},
		{"ping is not subscribable", "POST", base, `{"url":"https://x.example/h","events":["ping"]}`, "events", 400},
		{"events with a duplicate", "POST", base, `{"url":"https://x.example/h","events":["sale.created","sale.created"]}`, "events", 400},
		{"description too long", "POST", base, `{"url":"https://x.example/h","events":["sale.created"],"description":"` + strings.Repeat("é", 501) + `"}`, "description", 400},
		{"include_test not a boolean", "POST", base, `{"url":"https://x.example/h","events":["sale.created"],"include_test":"yes"}`, "include_test", 400},
		{"an unknown field", "POST", base, `{"url":"https://x.example/h","events":["sale.created"],"secret":"whsec_x"}`, "secret", 400},
		{"a NUL in a description", "POST", base, `{"url":"https://x.example/h","events":["sale.created"],"description":"a\u0000"}`, "description", 400},
		{"invalid UTF-8", "POST", base, "{\"url\":\"https://x.example/\xff\",\"events\":[\"sale.created\"]}", "body", 400},
		{"not JSON", "POST", base, `{"url":`, "", 400},
		{"no body", "POST", base, ``, "", 400},
		{"patch with nothing", "PATCH", one, `{}`, "body", 400},
		{"patch enabled not a boolean", "PATCH", one, `{"enabled":1}`, "enabled", 400},
		{"patch events empty", "PATCH", one, `{"events":[]}`, "events", 400},
		{"patch url refused", "PATCH", one, `{"url":"http://` + refusedHost + `/h"}`, "url", 400},
		{"patch an unknown field", "PATCH", one, `{"program_id":2}`, "program_id", 400},
		{"webhookId not a number", "PATCH", base + "/abc", `{"enabled":true}`, "webhookId", 400},
		{"webhookId zero", "POST", base + "/0/secret", ``, "webhookId", 400},
		{"program id not a number", "GET", "/api/v1/programs/x/webhooks", ``, "id", 400},
		{"deliveryId not a number", "POST", one + "/deliveries/-1/retry", ``, "deliveryId", 400},
		{"delivery status unknown", "GET", one + "/deliveries?status=lost", ``, "status", 400},
		{"delivery limit too large", "GET", one + "/deliveries?limit=101", ``, "limit", 400},
		{"delivery cursor forged", "GET", one + "/deliveries?cursor=zz", ``, "cursor", 400},
		{"an unknown parameter", "GET", one + "/deliveries?page=2", ``, "page", 400},
		{"a NUL in a parameter", "GET", one + "/deliveries?status=%00", ``, "status", 400},
		{"notifications cursor forged", "GET", base + "/notifications?cursor=zz", ``, "cursor", 400},
		{"notifications cursor of no id", "GET", base + "/notifications?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("0")), ``, "cursor", 400},
		{"notifications limit zero", "GET", base + "/notifications?limit=0", ``, "limit", 400},
		{"notifications take no status", "GET", base + "/notifications?status=failed", ``, "status", 400},
		{"notifications cursor sent twice", "GET", base + "/notifications?cursor=MQ&cursor=Mg", ``, "cursor", 400},
		{"notifications is no endpoint id", "PATCH", base + "/notifications", `{"enabled":true}`, "webhookId", 400},
		{"a body on test", "POST", one + "/test", `{"x":1}`, "x", 400},
		{"a body too large", "POST", base, `{"url":"https://x.example/h","events":["sale.created"],"description":"` + strings.Repeat("a", 70000) + `"}`, "", 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := f.on(t)
			r := f.want(f.call(owner, c.method, c.path, c.body), c.status)
			if r.str("error", "name") == "" || r.body["data"] != nil {
				t.Fatalf("not the platform envelope: %s", r.raw)
			}
			if got := r.str("error", "details", "field"); got != c.field {
				t.Fatalf("field %q, want %q: %s", got, c.field, r.raw)
			}
		})
	}
	if n := f.count(`SELECT count(*) FROM endpoints`); n != 1 {
		t.Fatalf("%d endpoints after refusals", n)
	}
	t.Run("a reader sending a bad body learns only that it may not write", func(t *testing.T) {
		f := f.on(t)
		r := f.want(f.call(reader, "POST", base, `{"url":12}`), 403)
		if r.str("error", "details", "field") != "" {
			t.Fatal(r.raw)
		}
	})
	t.Run("a field of 500 characters and a URL of 2048 are accepted", func(t *testing.T) {
		f := f.on(t)
		u := "https://hooks.example/" + strings.Repeat("a", 2048-len("https://hooks.example/"))
		f.create(progA, map[string]any{"url": u, "events": []string{"lead.created"}, "description": strings.Repeat("é", 500)})
	})
}

func TestEndpointsPerProgramAreCapped(t *testing.T) {
	f := newFixture(t, true)
	for range webhook.MaxEndpoints {
		f.create(progA, valid)
	}
	r := f.want(f.call(owner, "POST", "/api/v1/programs/1/webhooks", valid), 409)
	if !strings.Contains(r.str("error", "message"), "at most 20") {
		t.Fatal(r.raw)
	}
	if n := f.count(`SELECT count(*) FROM endpoints WHERE program_id = 1`); n != webhook.MaxEndpoints {
		t.Fatalf("%d endpoints", n)
	}
	// Another program's cap is its own.
	f.tokens[owner] = f.tokens[owner2]
	f.want(f.call(owner, "POST", "/api/v1/programs/2/webhooks", valid), 201)
}

func TestNoSecretKey(t *testing.T) {
	f := newFixture(t, false)
	r := f.want(f.call(owner, "POST", "/api/v1/programs/1/webhooks", valid), 503)
	if !strings.Contains(r.str("error", "message"), "not configured") || r.str("error", "name") != "ServiceUnavailableError" {
		t.Fatal(r.raw)
	}
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO endpoints (id, program_id, url, events, created_at, updated_at) VALUES (5, 1, 'https://x.example', '{sale.created}', now(), now())`); err != nil {
		t.Fatal(err)
	}
	f.want(f.call(owner, "POST", "/api/v1/programs/1/webhooks/5/secret", nil), 503)
	f.want(f.call(owner, "GET", "/api/v1/programs/1/webhooks", nil), 200)
	// Access first: a reader is refused 403 before anything is said about
	// the server's configuration.
	f.want(f.call(reader, "POST", "/api/v1/programs/1/webhooks", valid), 403)
	if n := f.count(`SELECT count(*) FROM endpoint_secrets`); n != 0 {
		t.Fatalf("%d secrets", n)
	}
}

func TestCursorIsOpaque(t *testing.T) {
	f := newFixture(t, true)
	id := f.create(progA, valid).num("data", "id")
	for range 3 {
		f.want(f.call(owner, "POST", fmt.Sprintf("/api/v1/programs/1/webhooks/%d/test", id), nil), 202)
	}
	r := f.want(f.call(owner, "GET", fmt.Sprintf("/api/v1/programs/1/webhooks/%d/deliveries?limit=2", id), nil), 200)
	next, _ := r.body["next_cursor"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(next)
	if err != nil || string(raw) != fmt.Sprint(int64(r.body["data"].([]any)[1].(map[string]any)["id"].(float64))) {
		t.Fatalf("cursor %q", next)
	}
}

// testLog sends the routes' logs to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// All routes share one bucket per session token: the fourth request of a
// token in a minute is refused 429 before anything runs, another token has
// its own bucket, and the next minute the token may ask again.
func TestRateLimitPerSessionToken(t *testing.T) {
	clock := platformtest.NewClock(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	l, err := ratelimit.New(ratelimit.Config{Limit: 3, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, true, ratelimit.Middleware(l, ratelimit.BearerOrIP(nil)))
	f.want(f.call(owner, "GET", "/api/v1/programs/1/webhooks", nil), 200)
	f.want(f.call(owner, "POST", "/api/v1/programs/1/webhooks", valid), 201)
	f.want(f.call(owner, "GET", "/api/v1/programs/1/webhooks", nil), 200)
	r := f.want(f.call(owner, "POST", "/api/v1/programs/1/webhooks", valid), 429)
	if r.str("error", "code") != "rate_limited" {
		t.Fatal(r.raw)
	}
	if n := f.count(`SELECT count(*) FROM endpoints`); n != 1 {
		t.Fatalf("%d endpoints: the refused request ran", n)
	}
	f.want(f.call(reader, "GET", "/api/v1/programs/1/webhooks", nil), 200)
	clock.Advance(time.Minute)
	f.want(f.call(owner, "GET", "/api/v1/programs/1/webhooks", nil), 200)
}

// failOut has the dispatcher disable program A's endpoint as after
// DISABLE_AFTER of failures, through its own store (delivery/pgstore): a
// ping, its claim, and a failed attempt of an endpoint failing since then.
func (f *fixture) failOut(id int64) {
	f.t.Helper()
	f.want(f.call(owner, "POST", fmt.Sprintf("/api/v1/programs/%d/webhooks/%d/test", progA, id), nil), 202)
	ctx := context.Background()
	ds := deliverystore.New(f.pool)
	now := f.clock.Now()
	claimed, err := ds.Claim(ctx, delivery.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10, PerEndpoint: 10})
	if err != nil || len(claimed) != 1 || claimed[0].EndpointID != id {
		f.t.Fatalf("claim: %+v %v", claimed, err)
	}
	c := claimed[0]
	rec, err := ds.Record(ctx, delivery.Outcome{DeliveryID: c.ID, EndpointID: id, Attempt: c.Attempt, Now: now, NextAttemptAt: now.Add(time.Hour),
		Status: 500, Error: "HTTP 500", EndpointFault: true, DisableBefore: now})
	if err != nil || !rec.Disabled {
		f.t.Fatalf("record: %+v %v", rec, err)
	}
}

// The notifications route: what the dispatcher told the program, newest
// first, paged as the delivery log, to any reader of the program and to no
// one else; a deleted endpoint's notification stays, its url null.
func TestNotifications(t *testing.T) {
	f := newFixture(t, true)
	base := fmt.Sprintf("/api/v1/programs/%d/webhooks/notifications", progA)
	first := f.create(progA, valid).num("data", "id")
	second := f.create(progA, map[string]any{"url": "https://second.brand.example/h", "events": []string{"sale.created"}}).num("data", "id")
	f.want(f.call(owner2, "POST", "/api/v1/programs/2/webhooks", valid), 201)

	t.Run("none yet: an empty page", func(t *testing.T) {
		f := f.on(t)
		r := f.want(f.call(owner, "GET", base, nil), 200)
		if next, present := r.body["next_cursor"]; !present || next != nil || len(r.body["data"].([]any)) != 0 || len(r.body) != 2 {
			t.Fatalf("empty: %s", r.raw)
		}
	})

	f.failOut(first)
	disabledAt := f.clock.Now()
	f.clock.Advance(time.Hour)
	f.failOut(second)

	t.Run("the owner and a reader see both, newest first", func(t *testing.T) {
		f := f.on(t)
		for _, user := range []int64{owner, reader} {
			r := f.want(f.call(user, "GET", base, nil), 200)
			items := r.body["data"].([]any)
			if len(items) != 2 || r.body["next_cursor"] != nil {
				t.Fatalf("list: %s", r.raw)
			}
			n0, n1 := items[0].(map[string]any), items[1].(map[string]any)
			if n0["endpoint_id"] != float64(second) || n0["url"] != "https://second.brand.example/h" || n0["kind"] != "endpoint_disabled" ||
				n1["endpoint_id"] != float64(first) || n1["created_at"] != disabledAt.Format(time.RFC3339) || n0["id"].(float64) <= n1["id"].(float64) ||
				len(n0) != 5 {
				t.Fatalf("list: %s", r.raw)
			}
		}
	})

	t.Run("paged by limit and cursor", func(t *testing.T) {
		f := f.on(t)
		r := f.want(f.call(reader, "GET", base+"?limit=1", nil), 200)
		next, _ := r.body["next_cursor"].(string)
		if len(r.body["data"].([]any)) != 1 || next == "" {
			t.Fatalf("first page: %s", r.raw)
		}
		r = f.want(f.call(reader, "GET", base+"?limit=1&cursor="+url.QueryEscape(next), nil), 200)
		items := r.body["data"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["endpoint_id"] != float64(first) || r.body["next_cursor"] != nil {
			t.Fatalf("second page: %s", r.raw)
		}
	})

	t.Run("another tenant: 403 on A's, none of A's in its own", func(t *testing.T) {
		f := f.on(t)
		r := f.want(f.call(owner2, "GET", base, nil), 403)
		if r.str("error", "message") != "You do not have access to this program" || strings.Contains(r.raw, "brand.example") {
			t.Fatal(r.raw)
		}
		r = f.want(f.call(owner2, "GET", "/api/v1/programs/2/webhooks/notifications", nil), 200)
		if len(r.body["data"].([]any)) != 0 {
			t.Fatalf("B sees A's: %s", r.raw)
		}
		// A bad cursor is no way round the access check.
		f.want(f.call(owner2, "GET", base+"?cursor=zz", nil), 403)
	})

	t.Run("an inactive member 403, no session 401, an unknown program 404", func(t *testing.T) {
		f := f.on(t)
		f.want(f.call(gone, "GET", base, nil), 403)
		f.want(f.call(0, "GET", base, nil), 401)
		r := f.want(f.call(owner, "GET", "/api/v1/programs/999/webhooks/notifications", nil), 404)
		if r.str("error", "message") != "Program not found" {
			t.Fatal(r.raw)
		}
	})

	t.Run("a deleted endpoint's notification stays, its url null", func(t *testing.T) {
		f := f.on(t)
		f.want(f.call(owner, "DELETE", fmt.Sprintf("/api/v1/programs/1/webhooks/%d", first), nil), 204)
		r := f.want(f.call(owner, "GET", base, nil), 200)
		items := r.body["data"].([]any)
		if len(items) != 2 {
			t.Fatalf("after the delete: %s", r.raw)
		}
		n1 := items[1].(map[string]any)
		if url, present := n1["url"]; !present || url != nil || n1["endpoint_id"] != float64(first) {
			t.Fatalf("the deleted endpoint's notification: %s", r.raw)
		}
	})
}
