package server_test

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

// The admin reads and the key import that let the local stack's seed find
// what exists and create only what is missing.

// lookupList returns data as a list, failing when it is anything else.
func lookupList(t *testing.T, r reply) []map[string]any {
	t.Helper()
	raw, ok := r.body["data"].([]any)
	if !ok {
		t.Fatalf("data is not a list: %s", r.raw)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, v := range raw {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("list item is not an object: %s", r.raw)
		}
		out = append(out, m)
	}
	return out
}

func lookupIDs(items []map[string]any) []int64 {
	ids := make([]int64, 0, len(items))
	for _, it := range items {
		f, _ := it["id"].(float64)
		ids = append(ids, int64(f))
	}
	return ids
}

// lookupField asserts a 400 naming field in error.details.field.
func lookupField(t *testing.T, r reply, field, message string) {
	t.Helper()
	wantError(t, r, 400, "BadRequestError", message)
	if d := r.body["error"].(map[string]any)["details"].(map[string]any); d["field"] != field {
		t.Fatalf("details.field = %v, want %s: %s", d["field"], field, r.raw)
	}
}

func (s *stack) catalogSeq() int64 {
	s.t.Helper()
	var n int64
	if err := s.pool.QueryRow(context.Background(), `SELECT seq FROM catalog_seq`).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

func TestAdminLookups(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog()
	ctx := context.Background()

	r := s.admin("POST", "/admin/v1/users", `{"email":"dash@brand.example","name":"Dana","advertiser_id":`+itoa(ids.advertiser)+`}`)
	dash := dataID(t, r)
	r = s.admin("POST", "/admin/v1/users", `{"email":"a+tag@solo.example"}`)
	solo := dataID(t, r)
	r = s.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+itoa(ids.advertiser)+`,"name":"Second","domain":"two.brand.example","commission_type":"fixed","commission_rate":5}`)
	program2 := dataID(t, r)
	r = s.admin("POST", "/admin/v1/advertisers", `{"name":"Empty","email":"empty@brand.example"}`)
	emptyAdvertiser := dataID(t, r)
	r = s.admin("POST", "/admin/v1/programs/"+itoa(ids.program)+"/links", `{"partner_id":`+itoa(ids.partner)+`,"code":"CODE2","active":false}`)
	link2 := dataID(t, r)
	r = s.admin("POST", "/admin/v1/programs/"+itoa(ids.program)+"/keys", `{}`)
	liveKey := dataID(t, r)
	livePlain := r.body["data"].(map[string]any)["key"].(string)
	// A second partner with the same address in another case, written
	// directly: the API stores emails in lower case, older rows may not be.
	var partner2 int64
	if err := s.pool.QueryRow(ctx, `INSERT INTO partners (name, email) VALUES ('P2', 'P@Partner.Example') RETURNING id`).Scan(&partner2); err != nil {
		t.Fatal(err)
	}

	seqBefore, outboxBefore := s.catalogSeq(), s.count("outbox")
	defer func() {
		// Reads write nothing and publish nothing.
		if got := s.catalogSeq(); got != seqBefore {
			t.Errorf("catalog seq %d -> %d after reads", seqBefore, got)
		}
		if got := s.count("outbox"); got != outboxBefore {
			t.Errorf("outbox %d -> %d after reads", outboxBefore, got)
		}
	}()
	read := func(t *testing.T, path string) reply {
		t.Helper()
		r := s.admin("GET", path, "")
		if r.header.Get("X-Catalog-Seq") != "" {
			t.Fatalf("a read answered X-Catalog-Seq %q", r.header.Get("X-Catalog-Seq"))
		}
		return r
	}
	ok := func(t *testing.T, path string) reply {
		t.Helper()
		r := read(t, path)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.raw)
		}
		return r
	}

	t.Run("GET users by email 200 matches case-insensitively", func(t *testing.T) {
		r := ok(t, "/admin/v1/users?email=DASH@Brand.EXAMPLE")
		u := r.body["data"].(map[string]any)
		want := map[string]any{"id": float64(dash), "email": "dash@brand.example", "name": "Dana",
			"advertiser_id": float64(ids.advertiser), "blocked": false}
		for k, v := range want {
			if u[k] != v {
				t.Errorf("%s = %v, want %v", k, u[k], v)
			}
		}
		if ts, _ := u["created_at"].(string); !strings.HasSuffix(ts, "Z") {
			t.Errorf("created_at %v", u["created_at"])
		}
	})
	t.Run("GET users by email 200 without advertiser answers null, + encoded as %2B", func(t *testing.T) {
		r := ok(t, "/admin/v1/users?email=a%2Btag@solo.example")
		u := r.body["data"].(map[string]any)
		if u["id"] != float64(solo) || !hasKey(u, "advertiser_id") || u["advertiser_id"] != nil {
			t.Fatalf("user %s", r.raw)
		}
	})
	t.Run("GET users by email 404", func(t *testing.T) {
		wantError(t, read(t, "/admin/v1/users?email=nobody@brand.example"), 404, "NotFoundError", "user with email nobody@brand.example not found")
	})
	t.Run("GET users by email 400", func(t *testing.T) {
		lookupField(t, read(t, "/admin/v1/users"), "email", "email is required")
		lookupField(t, read(t, "/admin/v1/users?email="), "email", "email is required")
		lookupField(t, read(t, "/admin/v1/users?email=nope"), "email", "email must be a valid email address")
		// An unencoded + is a space in a query string.
		lookupField(t, read(t, "/admin/v1/users?email=a+tag@solo.example"), "email", "email must be a valid email address")
	})

	t.Run("GET programs by advertiser 200 ordered by id, as GET /programs/{id}", func(t *testing.T) {
		r := ok(t, "/admin/v1/programs?advertiser_id="+itoa(ids.advertiser))
		list := lookupList(t, r)
		if got := lookupIDs(list); !reflect.DeepEqual(got, []int64{ids.program, program2}) {
			t.Fatalf("ids %v", got)
		}
		for _, p := range list {
			one := ok(t, "/admin/v1/programs/"+itoa(lookupIDs([]map[string]any{p})[0]))
			if !reflect.DeepEqual(p, one.body["data"]) {
				t.Fatalf("list item %v\nGET /programs/{id} %v", p, one.body["data"])
			}
		}
	})
	t.Run("GET programs by advertiser 200 empty list", func(t *testing.T) {
		r := ok(t, "/admin/v1/programs?advertiser_id="+itoa(emptyAdvertiser))
		if !strings.Contains(r.raw, `"data":[]`) {
			t.Fatalf("want data:[]: %s", r.raw)
		}
	})
	t.Run("GET programs by advertiser 404", func(t *testing.T) {
		wantError(t, read(t, "/admin/v1/programs?advertiser_id=999"), 404, "NotFoundError", "advertiser 999 not found")
	})
	t.Run("GET programs by advertiser 400", func(t *testing.T) {
		lookupField(t, read(t, "/admin/v1/programs"), "advertiser_id", "advertiser_id is required")
		for _, v := range []string{"abc", "0", "-3", "1.5", "99999999999999999999"} {
			lookupField(t, read(t, "/admin/v1/programs?advertiser_id="+v), "advertiser_id", "advertiser_id must be a positive integer")
		}
	})

	t.Run("GET partners by email 200 every match, ordered by id", func(t *testing.T) {
		r := ok(t, "/admin/v1/partners?email=p@PARTNER.example")
		list := lookupList(t, r)
		if got := lookupIDs(list); !reflect.DeepEqual(got, []int64{ids.partner, partner2}) {
			t.Fatalf("ids %v", got)
		}
		if list[0]["name"] != "P" || list[0]["email"] != "p@partner.example" || list[1]["email"] != "P@Partner.Example" || list[0]["created_at"] == nil {
			t.Fatalf("partners %s", r.raw)
		}
	})
	t.Run("GET partners by email 200 empty list", func(t *testing.T) {
		r := ok(t, "/admin/v1/partners?email=none@partner.example")
		if !strings.Contains(r.raw, `"data":[]`) {
			t.Fatalf("want data:[]: %s", r.raw)
		}
	})
	t.Run("GET partners by email 400", func(t *testing.T) {
		lookupField(t, read(t, "/admin/v1/partners"), "email", "email is required")
		lookupField(t, read(t, "/admin/v1/partners?email=a@"), "email", "email must be a valid email address")
	})

	links := "/admin/v1/programs/" + itoa(ids.program) + "/links"
	t.Run("GET links 200 all, ordered by id", func(t *testing.T) {
		list := lookupList(t, ok(t, links))
		if got := lookupIDs(list); !reflect.DeepEqual(got, []int64{ids.link, link2}) {
			t.Fatalf("ids %v", got)
		}
		want := map[string]any{"program_id": float64(ids.program), "partner_id": float64(ids.partner), "code": "CODE2", "active": false}
		for k, v := range want {
			if list[1][k] != v {
				t.Errorf("%s = %v, want %v", k, list[1][k], v)
			}
		}
	})
	t.Run("GET links 200 by code", func(t *testing.T) {
		list := lookupList(t, ok(t, links+"?code=CODE1"))
		if got := lookupIDs(list); !reflect.DeepEqual(got, []int64{ids.link}) || list[0]["active"] != true {
			t.Fatalf("links %v", list)
		}
		// Codes compare exactly, as their unique constraint does.
		for _, c := range []string{"code1", "NOPE"} {
			if r := ok(t, links+"?code="+c); !strings.Contains(r.raw, `"data":[]`) {
				t.Fatalf("code %s: %s", c, r.raw)
			}
		}
		if r := ok(t, "/admin/v1/programs/"+itoa(program2)+"/links"); !strings.Contains(r.raw, `"data":[]`) {
			t.Fatalf("program without links: %s", r.raw)
		}
	})
	t.Run("GET links 404", func(t *testing.T) {
		wantError(t, read(t, "/admin/v1/programs/999/links"), 404, "NotFoundError", "program 999 not found")
		wantError(t, read(t, "/admin/v1/programs/abc/links?code=CODE1"), 404, "NotFoundError", `program "abc" not found`)
	})
	t.Run("GET links 400", func(t *testing.T) {
		for _, c := range []string{"", "a%20b", strings.Repeat("x", 65)} {
			lookupField(t, read(t, links+"?code="+c), "code", "code must be 1 to 64 letters, digits, '-' or '_'")
		}
	})

	keys := "/admin/v1/programs/" + itoa(ids.program) + "/keys"
	t.Run("GET keys 200 without the key", func(t *testing.T) {
		r := ok(t, keys)
		list := lookupList(t, r)
		if got := lookupIDs(list); !reflect.DeepEqual(got, []int64{ids.key, liveKey}) {
			t.Fatalf("ids %v", got)
		}
		if strings.Contains(r.raw, livePlain) || strings.Contains(r.raw, livePlain[apikey.PrefixLen:]) {
			t.Fatal("the list shows the key")
		}
		wantKeys := []string{"created_at", "id", "masked", "prefix", "program_id", "rotation_deadline", "rotation_marked_at", "test"}
		for _, k := range list {
			var got []string
			for name := range k {
				got = append(got, name)
			}
			if len(got) != len(wantKeys) {
				t.Fatalf("key fields %v, want %v", got, wantKeys)
			}
			for _, name := range wantKeys {
				if !hasKey(k, name) {
					t.Fatalf("key fields %v, want %v", got, wantKeys)
				}
			}
		}
		live := list[1]
		if live["prefix"] != livePlain[:apikey.PrefixLen] || live["masked"] != livePlain[:apikey.PrefixLen]+"••••" ||
			live["test"] != false || list[0]["test"] != true || live["rotation_deadline"] != nil || live["rotation_marked_at"] != nil {
			t.Fatalf("keys %s", r.raw)
		}
	})
	t.Run("GET keys 200 shows rotation", func(t *testing.T) {
		r := s.admin("POST", "/admin/v1/keys/"+itoa(liveKey)+"/rotation", `{"deadline":"2031-02-03T04:05:06Z"}`)
		if r.status != 200 {
			t.Fatalf("rotation: %d %s", r.status, r.raw)
		}
		seqBefore, outboxBefore = s.catalogSeq(), s.count("outbox")
		list := lookupList(t, ok(t, keys))
		if list[1]["rotation_deadline"] != "2031-02-03T04:05:06Z" || list[1]["rotation_marked_at"] == nil || list[0]["rotation_deadline"] != nil {
			t.Fatalf("keys %v", list)
		}
	})
	t.Run("GET keys 200 empty and 404", func(t *testing.T) {
		if r := ok(t, "/admin/v1/programs/"+itoa(program2)+"/keys"); !strings.Contains(r.raw, `"data":[]`) {
			t.Fatalf("program without keys: %s", r.raw)
		}
		wantError(t, read(t, "/admin/v1/programs/999/keys"), 404, "NotFoundError", "program 999 not found")
	})

	t.Run("non-admin tokens are refused", func(t *testing.T) {
		paths := []string{
			"/admin/v1/users?email=dash@brand.example",
			"/admin/v1/programs?advertiser_id=" + itoa(ids.advertiser),
			"/admin/v1/partners?email=p@partner.example",
			links, keys,
		}
		for _, p := range paths {
			wantError(t, s.do("GET", p, "", "", ""), 401, "UnauthorizedError", "Missing or malformed Authorization header. Expected: Bearer <admin_token>")
			wantError(t, s.do("GET", p, "nope", "", ""), 401, "UnauthorizedError", "Invalid admin token")
			// A program API key is not an admin token.
			wantError(t, s.do("GET", p, livePlain, "", ""), 401, "UnauthorizedError", "Invalid admin token")
		}
	})
}

func TestAdminKeyImport(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog()
	r := s.admin("POST", "/admin/v1/advertisers", `{"name":"Other","email":"o@other.example"}`)
	r = s.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+itoa(dataID(t, r))+`,"name":"Other","domain":"other.example","commission_type":"fixed","commission_rate":5}`)
	other := dataID(t, r)
	keys := "/admin/v1/programs/" + itoa(ids.program) + "/keys"
	ctx := context.Background()

	livePlain, _, _, err := apikey.Generate(false)
	if err != nil {
		t.Fatal(err)
	}
	testPlain, _, _, err := apikey.Generate(true)
	if err != nil {
		t.Fatal(err)
	}
	var liveID int64

	t.Run("import 201 stores hash and prefix, publishes, and the key authenticates", func(t *testing.T) {
		seq, outbox := s.catalogSeq(), s.count("outbox")
		r := s.admin("POST", keys, `{"key":"`+livePlain+`"}`)
		if r.status != 201 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		d := r.body["data"].(map[string]any)
		liveID = dataID(t, r)
		if d["key"] != livePlain || d["test"] != false || len(d) != 3 {
			t.Fatalf("answer %s", r.raw)
		}
		if r.header.Get("X-Catalog-Seq") != itoa(seq+1) || s.count("outbox") != outbox+1 {
			t.Fatalf("seq header %q, outbox %d -> %d", r.header.Get("X-Catalog-Seq"), outbox, s.count("outbox"))
		}
		var hash []byte
		var prefix string
		var program int64
		var test bool
		if err := s.pool.QueryRow(ctx, `SELECT key_hash, prefix, program_id, test FROM api_keys WHERE id = $1`, liveID).
			Scan(&hash, &prefix, &program, &test); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hash, apikey.Hash(livePlain)) || prefix != livePlain[:apikey.PrefixLen] || program != ids.program || test {
			t.Fatalf("stored %x %q %d %v", hash, prefix, program, test)
		}
		var inPayload int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE position(convert_to($1,'UTF8') in payload) > 0`, livePlain).Scan(&inPayload); err != nil {
			t.Fatal(err)
		}
		if inPayload != 0 {
			t.Fatal("the plain key is in a catalog event")
		}
		st := s.do("GET", "/api/v1/cli/status", livePlain, "", "")
		if st.status != 200 {
			t.Fatalf("status with the imported key: %d %s", st.status, st.raw)
		}
		if got := st.body["data"].(map[string]any)["programId"]; got != itoa(ids.program) {
			t.Fatalf("status programId %v, want %d", got, ids.program)
		}
	})
	t.Run("import 201 test key, kind from the key or matching test", func(t *testing.T) {
		r := s.admin("POST", keys, `{"key":"`+testPlain+`"}`)
		if r.status != 201 || r.body["data"].(map[string]any)["test"] != true {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		p2, _, _, _ := apikey.Generate(true)
		r = s.admin("POST", keys, `{"key":"`+p2+`","test":true}`)
		if r.status != 201 || r.body["data"].(map[string]any)["test"] != true || r.body["data"].(map[string]any)["key"] != p2 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		var test bool
		if err := s.pool.QueryRow(ctx, `SELECT test FROM api_keys WHERE key_hash = $1`, apikey.Hash(p2)).Scan(&test); err != nil || !test {
			t.Fatalf("stored test=%v %v", test, err)
		}
	})

	body := strings.Repeat("A", 43)
	refusals := []struct {
		name, body, message string
	}{
		{"too short", `{"key":"svc_live_abc"}`, "key must be a program API key: svc_live_ or svc_test_ followed by 43 letters or digits"},
		{"unknown prefix", `{"key":"sk_live_` + body + `"}`, "key must be a program API key: svc_live_ or svc_test_ followed by 43 letters or digits"},
		{"bad character", `{"key":"svc_live_` + body[:42] + `-"}`, "key must be a program API key: svc_live_ or svc_test_ followed by 43 letters or digits"},
		{"empty", `{"key":""}`, "key must be a program API key: svc_live_ or svc_test_ followed by 43 letters or digits"},
		{"not a string", `{"key":42}`, "key must be a string"},
		{"live key but test true", `{"key":"svc_live_` + body + `","test":true}`, "key is a live key (svc_live_) but test is true"},
		{"test key but test false", `{"key":"svc_test_` + body + `","test":false}`, "key is a test key (svc_test_) but test is false"},
	}
	for _, tc := range refusals {
		t.Run("import 400 "+tc.name, func(t *testing.T) {
			rows, outbox := s.count("api_keys"), s.count("outbox")
			r := s.admin("POST", keys, tc.body)
			lookupField(t, r, "key", tc.message)
			if r.header.Get("X-Catalog-Seq") != "" || s.count("api_keys") != rows || s.count("outbox") != outbox {
				t.Fatal("a refused key was written")
			}
		})
	}

	t.Run("import 409 duplicate names the stored key and writes nothing", func(t *testing.T) {
		var seedKeyProgram int64
		for _, tc := range []struct {
			name, path string
		}{
			{"same program", keys},
			{"another program", "/admin/v1/programs/" + itoa(other) + "/keys"},
		} {
			rows, outbox, seq := s.count("api_keys"), s.count("outbox"), s.catalogSeq()
			r := s.admin("POST", tc.path, `{"key":"`+livePlain+`"}`)
			wantError(t, r, 409, "ConflictError", "this API key already exists")
			d := r.body["error"].(map[string]any)["details"].(map[string]any)
			if d["key_id"] != float64(liveID) || d["program_id"] != float64(ids.program) {
				t.Fatalf("%s: details %v", tc.name, d)
			}
			if strings.Contains(r.raw, livePlain) {
				t.Fatalf("%s: the 409 repeats the key", tc.name)
			}
			if r.header.Get("X-Catalog-Seq") != "" || s.count("api_keys") != rows || s.count("outbox") != outbox || s.catalogSeq() != seq {
				t.Fatalf("%s: a duplicate key was written", tc.name)
			}
		}
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*), min(program_id) FROM api_keys WHERE key_hash = $1`, apikey.Hash(livePlain)).Scan(&n, &seedKeyProgram); err != nil {
			t.Fatal(err)
		}
		if n != 1 || seedKeyProgram != ids.program {
			t.Fatalf("%d rows with the hash, program %d", n, seedKeyProgram)
		}
	})
	t.Run("import 404 unknown program", func(t *testing.T) {
		fresh, _, _, _ := apikey.Generate(false)
		rows := s.count("api_keys")
		wantError(t, s.admin("POST", "/admin/v1/programs/999/keys", `{"key":"`+fresh+`"}`), 404, "NotFoundError", "program not found")
		if s.count("api_keys") != rows {
			t.Fatal("written")
		}
	})
	t.Run("import refused without the admin token", func(t *testing.T) {
		fresh, _, _, _ := apikey.Generate(false)
		rows := s.count("api_keys")
		for _, tok := range []string{"", "nope", livePlain} {
			r := s.do("POST", keys, tok, "application/json", `{"key":"`+fresh+`"}`)
			if r.status != 401 {
				t.Fatalf("token %q: %d %s", tok, r.status, r.raw)
			}
		}
		if s.count("api_keys") != rows {
			t.Fatal("a refused import was written")
		}
	})
	t.Run("generated keys still answer as before", func(t *testing.T) {
		r := s.admin("POST", keys, `{"test":true}`)
		d, _ := r.body["data"].(map[string]any)
		if r.status != 201 || d["test"] != true || !strings.HasPrefix(d["key"].(string), apikey.TestPrefix) {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if _, err := apikey.Parse(d["key"].(string)); err != nil {
			t.Fatalf("generated key does not parse: %v", err)
		}
	})
}
