package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	consoleendpoints "github.com/svc-dev/svc/services/webhooks/internal/endpoint/endpoints"
	consolehttp "github.com/svc-dev/svc/services/webhooks/internal/endpoint/httpapi"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
	eventstore "github.com/svc-dev/svc/services/webhooks/internal/events/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/listen"
	"github.com/svc-dev/svc/services/webhooks/internal/listen/endpoints"
	"github.com/svc-dev/svc/services/webhooks/internal/listen/httpapi"
	"github.com/svc-dev/svc/services/webhooks/internal/listen/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

const issuer = "svc-accounts"

// Programs and callers of the fixture: program 1 with its owner (11), a
// reader (12), an inactive member (13) and its API key; program 2 with its
// owner (21) and key; program 3 exists with no members.
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
	tokens map[string]string
}

// keyStore is apikey.Store over the replica's api_keys, uncached.
type keyStore struct{ pool *pgxpool.Pool }

func (k keyStore) LookupKeyByHash(ctx context.Context, hash []byte) (apikey.Key, error) {
	return catalogsync.LookupAPIKey(ctx, k.pool, hash)
}

func newFixture(t *testing.T, withKey bool) *fixture {
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
	f := &fixture{t: t, pool: pool, tokens: map[string]string{}}
	f.clock = platformtest.NewClock(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
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
	// Program keys: A's live and test keys, a revoked and a retired key of
	// A, B's key.
	for i, k := range []struct {
		name    string
		program int64
		test    bool
		revoked bool
		retired bool
	}{{"keyA", progA, false, false, false}, {"testKeyA", progA, true, false, false}, {"revokedA", progA, false, true, false},
		{"retiredA", progA, false, false, true}, {"keyB", progB, false, false, false}} {
		plain, hash, _, err := apikey.Generate(k.test)
		if err != nil {
			t.Fatal(err)
		}
		var deadline *time.Time
		if k.retired {
			d := f.clock.Now().Add(-time.Hour)
			deadline = &d
		}
		if _, err := pool.Exec(ctx, `INSERT INTO api_keys (id, program_id, key_hash, test, rotation_marked_at, rotation_deadline, revoked, catalog_seq)
			VALUES ($1, $2, $3, $4, $5, $5, $6, 1)`, i+1, k.program, hash, k.test, deadline, k.revoked); err != nil {
			t.Fatal(err)
		}
		f.tokens[k.name] = plain
	}
	priv, pub, err := session.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := session.ParsePrivateKey(priv)
	iss, err := session.NewIssuer(key, issuer, 30*24*time.Hour, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	pubKey, _ := session.ParsePublicKey(pub)
	verifier, err := session.NewVerifier(pubKey, issuer, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	store := pgstore.New(pool)
	logins, err := session.NewChecker(verifier, session.KindCLI, store)
	if err != nil {
		t.Fatal(err)
	}
	for name, uid := range map[string]int64{"owner": owner, "reader": reader, "gone": gone, "owner2": owner2} {
		tok, _, err := iss.Issue(uid, session.KindCLI)
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[name] = tok
	}
	dash, _, err := iss.Issue(owner, session.KindDashboard)
	if err != nil {
		t.Fatal(err)
	}
	f.tokens["dashboard"] = dash
	if withKey {
		if f.box, err = secret.NewBox(bytes.Repeat([]byte{7}, secret.KeySize)); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := listen.New(listen.Config{Store: store, Box: f.box, Now: f.clock.Now, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	routes := httpapi.Routes(endpoints.New(svc), httpapi.Config{Logins: logins, Keys: &apikey.Authenticator{Store: keyStore{pool}, Now: f.clock.Now},
		Logger: slog.New(slog.DiscardHandler)})
	// The console's routes beside them, as the service mounts both: a
	// pattern of one that collided with the other's would panic here.
	routes = append(routes, consolehttp.Routes(consoleendpoints.New(nil), consolehttp.Config{})...)
	for _, r := range routes {
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
	s, _ := a.get(keys...).(string)
	return s
}

func (a answer) num(keys ...string) int64 {
	n, _ := a.get(keys...).(float64)
	return int64(n)
}

func (a answer) get(keys ...string) any {
	var v any = a.body
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func (f *fixture) on(t *testing.T) *fixture {
	c := *f
	c.t = t
	return &c
}

// call sends body (a string as is, anything else as JSON) with the named
// credential (none when it is not a fixture's name).
func (f *fixture) call(who, method, path string, body any) answer {
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
	if tok, ok := f.tokens[who]; ok {
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

func (f *fixture) want(a answer, status int) answer {
	f.t.Helper()
	if a.status != status {
		f.t.Fatalf("status %d, want %d: %s", a.status, status, a.raw)
	}
	return a
}

func (f *fixture) start(who string, prog int64, body any) answer {
	f.t.Helper()
	return f.want(f.call(who, "POST", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen", prog), body), 201)
}

func (f *fixture) poll(who string, prog, id, after int64, wait int) answer {
	f.t.Helper()
	return f.call(who, "GET", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen/%d/events?after=%d&wait=%d", prog, id, after, wait), nil)
}

// write stores evs through the events writer, as the consumers do.
func (f *fixture) write(evs ...events.Event) {
	f.t.Helper()
	err := pg.InTx(context.Background(), f.pool, func(tx pgx.Tx) error {
		_, err := eventstore.Write(context.Background(), tx, evs)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func sale(id, program int64, test bool, at time.Time) events.Event {
	return events.Event{
		ID: events.EventID(fmt.Sprintf("env-sale-%d", id), events.TypeSaleCreated), Type: events.TypeSaleCreated, ProgramID: program,
		IsTest: test, ObjectKey: fmt.Sprintf("sale:%d", id), CreatedAt: at,
		Data: events.Sale{ID: id, TransactionID: fmt.Sprintf("tx_%d", id), AmountCents: 1000, Currency: "USD", Source: "api", Test: test, OccurredAt: events.Time(at)},
	}
}

func click(id, program int64, at time.Time) events.Event {
	return events.Event{ID: events.EventID(fmt.Sprintf("env-click-%d", id), events.TypeClickRecorded), Type: events.TypeClickRecorded,
		ProgramID: program, ObjectKey: fmt.Sprintf("click:%d", id), CreatedAt: at, Data: events.Click{ID: id, CreatedAt: events.Time(at)}}
}

func items(a answer) []map[string]any {
	var out []map[string]any
	for _, v := range a.get("data").([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

func TestListenLifecycle(t *testing.T) {
	f := newFixture(t, true)
	now := f.clock.Now()
	// A program A event from before any listener (an endpoint's): a new
	// listener starts after it.
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO endpoints (program_id, url, events, created_at, updated_at)
		VALUES (1, 'https://hooks.example/in', '{sale.created}', $1, $1)`, now); err != nil {
		t.Fatal(err)
	}
	old := sale(1, progA, false, now)
	f.write(old)
	var oldSeq int64
	if err := f.pool.QueryRow(context.Background(), `SELECT seq FROM events WHERE id = $1`, old.ID).Scan(&oldSeq); err != nil {
		t.Fatal(err)
	}

	started := f.start("owner", progA, nil)
	id, after := started.num("data", "id"), started.num("data", "after")
	sec := started.str("data", "secret")
	if after != oldSeq || !strings.HasPrefix(sec, "whsec_") || started.get("data", "include_test") != true ||
		started.str("data", "expires_at") != "2026-11-28T10:02:00Z" {
		t.Fatalf("start: %s", started.raw)
	}
	if evs, _ := json.Marshal(started.get("data", "events")); string(evs) != `["lead.created","sale.created","sale.refunded","commission.created","commission.approved","commission.reversed","commission.paid","partner.enrolled","payout.paid"]` {
		t.Fatalf("default events %s", evs)
	}

	t.Run("the secret is stored sealed for this listener", func(t *testing.T) {
		var sealed []byte
		if err := f.pool.QueryRow(context.Background(), `SELECT secret_sealed FROM listeners WHERE id = $1`, id).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		if got, err := f.box.OpenListener(sealed, id); err != nil || got != sec {
			t.Fatalf("open: %v", err)
		}
		if bytes.Contains(sealed, []byte(sec[len("whsec_"):])) {
			t.Fatal("stored in clear")
		}
	})

	t.Run("a poll answers the program's new events it wants, in order, bodies exact", func(t *testing.T) {
		f := f.on(t)
		live, test := sale(2, progA, false, now), sale(3, progA, true, now)
		f.write(live, click(4, progA, now), test, sale(5, progB, false, now))
		p := f.want(f.poll("owner", progA, id, after, 0), 200)
		got := items(p)
		if len(got) != 2 || got[0]["id"] != live.ID || got[1]["id"] != test.ID || got[0]["type"] != "sale.created" {
			t.Fatalf("poll: %s", p.raw)
		}
		body, _ := live.Body()
		if raw, _ := json.Marshal(got[0]["body"]); !bytes.Contains([]byte(p.raw), body) || len(raw) == 0 {
			t.Fatalf("the body is not the writer's bytes:\n%s\nwant inside %s", p.raw, body)
		}
		if p.num("after") != int64(got[1]["seq"].(float64)) || int64(got[0]["seq"].(float64)) <= after {
			t.Fatalf("after %d: %s", p.num("after"), p.raw)
		}
		after = p.num("after")
		// Nothing new: an empty page, after unchanged.
		p = f.want(f.poll("owner", progA, id, after, 0), 200)
		if len(items(p)) != 0 || p.num("after") != after {
			t.Fatalf("empty poll: %s", p.raw)
		}
	})

	t.Run("a waiting poll answers as soon as an event is written", func(t *testing.T) {
		f := f.on(t)
		done := make(chan answer, 1)
		begin := time.Now()
		touched := f.clock.Advance(time.Second).Add(listen.TTL)
		go func() { done <- f.poll("owner", progA, id, after, 25) }()
		// The poll is waiting once its touch moved the expiry: write then.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var exp time.Time
			if err := f.pool.QueryRow(context.Background(), `SELECT expires_at FROM listeners WHERE id = $1`, id).Scan(&exp); err != nil {
				t.Fatal(err)
			}
			if exp.Equal(touched) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the poll never touched the listener")
			}
			time.Sleep(10 * time.Millisecond)
		}
		ev := sale(6, progA, false, f.clock.Now())
		f.write(ev)
		select {
		case p := <-done:
			if p.status != 200 || len(items(p)) != 1 || items(p)[0]["id"] != ev.ID {
				t.Fatalf("poll: %d %s", p.status, p.raw)
			}
			if time.Since(begin) > 20*time.Second {
				t.Fatalf("the poll waited %s", time.Since(begin))
			}
			after = p.num("after")
		case <-time.After(30 * time.Second):
			t.Fatal("the poll did not answer")
		}
	})

	t.Run("a waiting poll with nothing new answers empty after its wait", func(t *testing.T) {
		begin := time.Now()
		p := f.on(t).want(f.on(t).poll("owner", progA, id, after, 1), 200)
		if len(items(p)) != 0 || p.num("after") != after || time.Since(begin) < time.Second {
			t.Fatalf("poll after %s: %s", time.Since(begin), p.raw)
		}
	})

	t.Run("the program's key reads the same listener; a reader's login too", func(t *testing.T) {
		f := f.on(t)
		for _, who := range []string{"keyA", "testKeyA", "reader"} {
			f.want(f.poll(who, progA, id, after, 0), 200)
		}
	})

	t.Run("another tenant is refused; through its own program the listener does not exist", func(t *testing.T) {
		f := f.on(t)
		for _, who := range []string{"owner2", "gone"} {
			if p := f.want(f.poll(who, progA, id, after, 0), 403); p.str("error", "message") != "You do not have access to this program" {
				t.Fatal(p.raw)
			}
		}
		if p := f.want(f.poll("keyB", progA, id, after, 0), 403); p.str("error", "message") != "This API key belongs to another program" {
			t.Fatal(p.raw)
		}
		f.want(f.call("keyB", "POST", "/api/v1/programs/1/webhooks/listen", nil), 403)
		f.want(f.call("keyB", "DELETE", fmt.Sprintf("/api/v1/programs/1/webhooks/listen/%d", id), nil), 403)
		f.want(f.poll("owner2", progB, id, after, 0), 404)
		f.want(f.poll("keyB", progB, id, after, 0), 404)
		f.want(f.call("owner2", "DELETE", fmt.Sprintf("/api/v1/programs/2/webhooks/listen/%d", id), nil), 404)
		f.want(f.call("owner2", "POST", "/api/v1/programs/3/webhooks/listen", nil), 403)
		f.want(f.call("owner2", "POST", "/api/v1/programs/99/webhooks/listen", nil), 404)
	})

	t.Run("each poll keeps the listener two minutes more; then it expires", func(t *testing.T) {
		f := f.on(t)
		f.clock.Advance(90 * time.Second)
		f.want(f.poll("owner", progA, id, after, 0), 200)
		f.clock.Advance(90 * time.Second) // 3 minutes after the start, 1.5 after the poll
		f.want(f.poll("owner", progA, id, after, 0), 200)
		// Events written meanwhile for it are kept; after expiry they are not.
		f.clock.Advance(listen.TTL + time.Second)
		if p := f.want(f.poll("owner", progA, id, after, 0), 404); !strings.Contains(p.str("error", "message"), "Listener not found") {
			t.Fatal(p.raw)
		}
		late := sale(7, progB, false, f.clock.Now())
		f.write(late) // program B has no listener nor endpoint
		var n int
		if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE id = $1`, late.ID).Scan(&n); err != nil || n != 0 {
			t.Fatalf("event kept without a listener: %d %v", n, err)
		}
	})

	t.Run("stop deletes the listener", func(t *testing.T) {
		f := f.on(t)
		s := f.start("keyA", progA, map[string]any{"events": []string{"sale.created"}, "include_test": false})
		lid := s.num("data", "id")
		if s.get("data", "include_test") != false {
			t.Fatal(s.raw)
		}
		test := sale(8, progA, true, f.clock.Now())
		f.write(test)
		if p := f.want(f.poll("keyA", progA, lid, s.num("data", "after"), 0), 200); len(items(p)) != 0 {
			t.Fatalf("a listener without include_test got a test sale: %s", p.raw)
		}
		f.want(f.call("keyA", "DELETE", fmt.Sprintf("/api/v1/programs/1/webhooks/listen/%d", lid), nil), 204)
		f.want(f.poll("keyA", progA, lid, 0, 0), 404)
		f.want(f.call("keyA", "DELETE", fmt.Sprintf("/api/v1/programs/1/webhooks/listen/%d", lid), nil), 404)
	})
}

func TestListenAuthentication(t *testing.T) {
	f := newFixture(t, true)
	path := "/api/v1/programs/1/webhooks/listen"
	for _, c := range []struct {
		name, who, header, msg string
	}{
		{"no header", "", "", httpapi.MsgMissing},
		{"not bearer", "", "Basic abc", httpapi.MsgMissing},
		{"a dashboard session", "dashboard", "", httpapi.MsgInvalidLogin},
		{"garbage", "", "Bearer nonsense", httpapi.MsgInvalidLogin},
		{"accounts' opaque login token", "", "Bearer svc_cli_abcdefghijklmnopqrstuvwxyz0123456789", httpapi.MsgOpaqueLogin},
		{"an unknown key", "", "Bearer svc_live_0000000000000000000000000000000000000000", httpapi.MsgInvalidKey},
		{"a revoked key", "revokedA", "", httpapi.MsgInvalidKey},
		{"a retired key", "retiredA", "", httpapi.MsgRetiredKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", f.srv.URL+path, nil)
			if c.who != "" {
				req.Header.Set("Authorization", "Bearer "+f.tokens[c.who])
			} else if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var body struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			_ = json.Unmarshal(raw, &body)
			if resp.StatusCode != 401 || body.Error.Message != c.msg {
				t.Fatalf("%d %s, want 401 %q", resp.StatusCode, raw, c.msg)
			}
		})
	}
	t.Run("a suspended user's login", func(t *testing.T) {
		f := f.on(t)
		f.want(f.call("owner", "POST", path, nil), 201)
		if _, err := f.pool.Exec(context.Background(), `UPDATE users SET blocked = true WHERE id = $1`, owner); err != nil {
			t.Fatal(err)
		}
		f.want(f.call("owner", "POST", path, nil), 401)
	})
}

func TestListenBadInput(t *testing.T) {
	f := newFixture(t, true)
	id := f.start("owner", progA, nil).num("data", "id")
	one := fmt.Sprintf("/api/v1/programs/1/webhooks/listen/%d", id)
	for _, c := range []struct {
		name, method, path string
		body               any
		field              string
	}{
		{"events empty", "POST", "/api/v1/programs/1/webhooks/listen", map[string]any{"events": []string{}}, "events"},
		{"events unknown", "POST", "/api/v1/programs/1/webhooks/listen", map[string]any{"events": []string{"sale.made"}}, "events"},
		{"events twice", "POST", "/api/v1/programs/1/webhooks/listen", map[string]any{"events": []string{"sale.created", "sale.created"}}, "events"},
		{"events not strings", "POST", "/api/v1/programs/1/webhooks/listen", `{"events":[1]}`, "events"},
		{"ping is not listenable", "POST", "/api/v1/programs/1/webhooks/listen", map[string]any{"events": []string{"ping"}}, "events"},
		{"include_test not a boolean", "POST", "/api/v1/programs/1/webhooks/listen", map[string]any{"include_test": "yes"}, "include_test"},
		{"an unknown field", "POST", "/api/v1/programs/1/webhooks/listen", map[string]any{"url": "x"}, "url"},
		{"a bad program id", "POST", "/api/v1/programs/x/webhooks/listen", nil, "id"},
		{"after missing", "GET", one + "/events", nil, "after"},
		{"after negative", "GET", one + "/events?after=-1", nil, "after"},
		{"after not a number", "GET", one + "/events?after=abc", nil, "after"},
		{"wait too long", "GET", one + "/events?after=0&wait=26", nil, "wait"},
		{"wait not a number", "GET", one + "/events?after=0&wait=1.5", nil, "wait"},
		{"after twice", "GET", one + "/events?after=0&after=1", nil, "after"},
		{"an unknown parameter", "GET", one + "/events?after=0&limit=3", nil, "limit"},
		{"a bad listener id", "GET", "/api/v1/programs/1/webhooks/listen/abc/events?after=0", nil, "listenerId"},
		{"a bad listener id to stop", "DELETE", "/api/v1/programs/1/webhooks/listen/0", nil, "listenerId"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := f.on(t)
			a := f.want(f.call("owner", c.method, c.path, c.body), 400)
			if a.str("error", "details", "field") != c.field {
				t.Fatalf("field %q, want %q: %s", a.str("error", "details", "field"), c.field, a.raw)
			}
			// An outsider learns nothing from the validation.
			if c.field != "id" {
				f.want(f.call("owner2", c.method, c.path, c.body), 403)
			}
		})
	}
}

func TestListenLimitsAndConfiguration(t *testing.T) {
	t.Run("at most MaxListeners live listeners per program; expired ones do not count", func(t *testing.T) {
		f := newFixture(t, true).on(t)
		for range listen.MaxListeners {
			f.start("owner", progA, nil)
		}
		f.want(f.call("owner", "POST", "/api/v1/programs/1/webhooks/listen", nil), 409)
		f.start("owner2", progB, nil) // another program's count
		f.clock.Advance(listen.TTL)
		f.start("owner", progA, nil)
		var n int
		if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM listeners WHERE program_id = 1`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d listeners of program 1 after the expired ones were swept, want 1 (%v)", n, err)
		}
	})
	t.Run("without WEBHOOKS_SECRET_KEY a start answers 503", func(t *testing.T) {
		f := newFixture(t, false).on(t)
		f.want(f.call("owner", "POST", "/api/v1/programs/1/webhooks/listen", nil), 503)
		f.want(f.call("owner2", "POST", "/api/v1/programs/1/webhooks/listen", nil), 403)
	})
}
