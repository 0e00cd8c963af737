package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/auth/oidctest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// count runs a count(*) query.
func (d *dash) count(sql string, args ...any) int {
	d.t.Helper()
	var n int
	if err := d.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		d.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// signInAs finishes a dashboard sign-in with claims in a new browser.
func (d *dash) signInAs(claims func(nonce string) oidctest.Claims) answer {
	d.t.Helper()
	c := d.newBrowser()
	req := d.start(c, "/dashboard/")
	return d.callback(c, req.State, d.p.IDToken(d.t, claims(req.Nonce)))
}

func verified(email, name string) func(string) oidctest.Claims {
	return func(nonce string) oidctest.Claims {
		return oidctest.Claims{Email: email, EmailVerified: true, Name: name, Nonce: nonce}
	}
}

// catalogEvents decodes the catalog events written after outbox id `after`.
func (d *dash) catalogEvents(after int64) []*eventsv1.Envelope {
	d.t.Helper()
	rows, err := d.pool.Query(context.Background(), `SELECT payload FROM outbox WHERE topic = $1 AND id > $2 ORDER BY id`, eventsv1.TopicCatalog, after)
	if err != nil {
		d.t.Fatal(err)
	}
	defer rows.Close()
	var out []*eventsv1.Envelope
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			d.t.Fatal(err)
		}
		env := &eventsv1.Envelope{}
		if err := proto.Unmarshal(raw, env); err != nil {
			d.t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

func (d *dash) lastOutboxID() int64 {
	d.t.Helper()
	var id int64
	if err := d.pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM outbox`).Scan(&id); err != nil {
		d.t.Fatal(err)
	}
	return id
}

func TestDashboardSignUpOpen(t *testing.T) {
	d := startDash(t, map[string]string{"SIGNUP": "open"})

	t.Run("an unknown verified email gets a user and a workspace it owns, in one catalog write with both events", func(t *testing.T) {
		before := d.lastOutboxID()
		tok := d.sessionFrom(d.signInAs(verified("Founder@NewBrand.example", "Founder Person")), "/dashboard/")
		var (
			uid, adv      int64
			advName, mail string
			subject       *string
		)
		if err := d.pool.QueryRow(context.Background(), `SELECT u.id, u.advertiser_id, a.name, a.email, u.oidc_subject
			FROM users u JOIN advertisers a ON a.id = u.advertiser_id WHERE lower(u.email) = 'founder@newbrand.example'`).
			Scan(&uid, &adv, &advName, &mail, &subject); err != nil {
			t.Fatal(err)
		}
		if advName != "Founder Person" || mail != "founder@newbrand.example" || subject == nil || *subject == "" {
			t.Fatalf("workspace %q %q, identity bound %v", advName, mail, subject)
		}
		evs := d.catalogEvents(before)
		if len(evs) != 2 || evs[0].Type != eventsv1.TypeAdvertiserUpserted || evs[1].Type != eventsv1.TypeUserUpserted || evs[1].Seq != evs[0].Seq+1 {
			t.Fatalf("catalog events %v", evs)
		}
		var a eventsv1.Advertiser
		var u eventsv1.User
		if proto.Unmarshal(evs[0].Payload, &a) != nil || proto.Unmarshal(evs[1].Payload, &u) != nil || a.Id != adv || u.Id != uid || u.AdvertiserId != adv {
			t.Fatalf("events: advertiser %v, user %v", &a, &u)
		}
		me := d.get(http.DefaultClient, d.base+"/api/v1/dashboard/me", tok)
		want := `{"data":{"programs":[],"user":{"email":"founder@newbrand.example","id":` + strconv.FormatInt(uid, 10) + `,"name":"Founder Person"},"workspaces":[{"id":` + strconv.FormatInt(adv, 10) + `,"name":"Founder Person","owner":true}]}}`
		if me.status != 200 || strings.TrimSpace(me.raw) != want {
			t.Fatalf("me: %d %s\nwant %s", me.status, me.raw, want)
		}

		t.Run("signing in again makes nothing", func(t *testing.T) {
			before := d.lastOutboxID()
			d.sessionFrom(d.signInAs(verified("founder@newbrand.example", "Founder Person")), "/dashboard/")
			if n := d.count(`SELECT count(*) FROM advertisers WHERE email = 'founder@newbrand.example'`); n != 1 {
				t.Fatalf("%d workspaces", n)
			}
			if evs := d.catalogEvents(before); len(evs) != 0 {
				t.Fatalf("events on a second sign-in: %v", evs)
			}
		})
	})

	t.Run("a known user without a workspace (command-line sign-in, an operator) gets one, once", func(t *testing.T) {
		d.admin("POST", "/admin/v1/users", `{"email":"cli-first@brand.example"}`)
		for i := 0; i < 2; i++ {
			d.sessionFrom(d.signInAs(verified("cli-first@brand.example", "")), "/dashboard/")
		}
		if n := d.count(`SELECT count(*) FROM users u JOIN advertisers a ON a.id = u.advertiser_id
			WHERE u.email = 'cli-first@brand.example' AND a.name = 'cli-first@brand.example'`); n != 1 {
			t.Fatalf("user with its workspace: %d", n)
		}
		if n := d.count(`SELECT count(*) FROM advertisers WHERE email = 'cli-first@brand.example'`); n != 1 {
			t.Fatalf("%d workspaces", n)
		}
	})

	t.Run("two first sign-ins at once make one user and one workspace", func(t *testing.T) {
		var wg sync.WaitGroup
		statuses := make([]int, 4)
		for i := range statuses {
			c := d.newBrowser()
			req := d.start(c, "/dashboard/")
			tok := d.p.IDToken(t, verified("race@newbrand.example", "")(req.Nonce))
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := c.PostForm(d.base+"/api/v1/dashboard/auth/callback", url.Values{"state": {req.State}, "id_token": {tok}})
				if err == nil {
					statuses[i] = resp.StatusCode
					_ = resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		for _, s := range statuses {
			if s != http.StatusSeeOther {
				t.Fatalf("statuses %v", statuses)
			}
		}
		if u, a := d.count(`SELECT count(*) FROM users WHERE email = 'race@newbrand.example'`), d.count(`SELECT count(*) FROM advertisers WHERE email = 'race@newbrand.example'`); u != 1 || a != 1 {
			t.Fatalf("%d users, %d workspaces", u, a)
		}
	})

	t.Run("an unverified email makes nothing", func(t *testing.T) {
		a := d.signInAs(func(nonce string) oidctest.Claims {
			return oidctest.Claims{Email: "unverified@newbrand.example", Nonce: nonce}
		})
		wantRefusal(t, a, 403, "Your email address is not verified with your sign-in provider. Verify it there, then try again.", "PROVIDER_EMAIL_NOT_VERIFIED")
		if n := d.count(`SELECT count(*) FROM users WHERE email = 'unverified@newbrand.example'`) + d.count(`SELECT count(*) FROM advertisers WHERE email = 'unverified@newbrand.example'`); n != 0 {
			t.Fatalf("%d rows written", n)
		}
	})
}

const notInvited = "There is no account for this email address yet, and this server signs up invited people only. Ask the owner of your workspace to invite you (they add you as a member of their program), then sign in again."

func TestDashboardSignUpInviteOnly(t *testing.T) {
	d := startDash(t, map[string]string{"SIGNUP": "invite"})

	t.Run("an unknown person is told whom to ask, and nothing is written", func(t *testing.T) {
		before := d.lastOutboxID()
		a := d.signInAs(verified("stranger@elsewhere.example", "Stranger"))
		wantRefusal(t, a, 403, notInvited, "SIGNUP_INVITE_ONLY")
		if strings.Contains(a.header.Get("Location"), "session=") {
			t.Fatalf("a refusal handed out a session: %v", a.header)
		}
		if n := d.count(`SELECT count(*) FROM users WHERE email = 'stranger@elsewhere.example'`) + d.count(`SELECT count(*) FROM advertisers WHERE email = 'stranger@elsewhere.example'`); n != 0 {
			t.Fatalf("%d rows written", n)
		}
		if evs := d.catalogEvents(before); len(evs) != 0 {
			t.Fatalf("events: %v", evs)
		}
	})

	t.Run("a browser gets a page saying so", func(t *testing.T) {
		c := d.newBrowser()
		req := d.start(c, "/dashboard/")
		r, _ := http.NewRequest("POST", d.base+"/api/v1/dashboard/auth/callback", strings.NewReader(url.Values{
			"state": {req.State}, "id_token": {d.token("stranger@elsewhere.example", req.Nonce)}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
		a := d.send(c, r)
		if a.status != 403 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") || !strings.Contains(a.raw, "Ask the owner of your workspace to invite you") ||
			!strings.Contains(a.raw, `<title>Ask for an invitation</title>`) || a.header.Get("Cache-Control") != "no-store" || a.header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("page: %d %v %s", a.status, a.header, a.raw)
		}
		if n := d.count(`SELECT count(*) FROM users WHERE email = 'stranger@elsewhere.example'`); n != 0 {
			t.Fatalf("%d users", n)
		}
	})

	t.Run("a known person signs in and gets no workspace", func(t *testing.T) {
		uid := d.id(d.admin("POST", "/admin/v1/users", `{"email":"invited@brand.example"}`))
		tok := d.sessionFrom(d.signInAs(verified("invited@brand.example", "")), "/dashboard/")
		me := d.get(http.DefaultClient, d.base+"/api/v1/dashboard/me", tok)
		want := `{"data":{"programs":[],"user":{"email":"invited@brand.example","id":` + strconv.FormatInt(uid, 10) + `,"name":""},"workspaces":[]}}`
		if me.status != 200 || strings.TrimSpace(me.raw) != want {
			t.Fatalf("me: %d %s\nwant %s", me.status, me.raw, want)
		}
		if n := d.count(`SELECT count(*) FROM users WHERE id = $1 AND advertiser_id IS NULL`, uid); n != 1 {
			t.Fatal("a workspace was made in invite mode")
		}
	})
}
