package server_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/services/tracking/internal/ingest/httpapi"
)

// Standards: bad input gets the spec's error (or a clear 400) and writes
// nothing. Postgres text and jsonb cannot hold U+0000, so a NUL in any
// string is refused at the edge (libs/httpkit) before it reaches a query,
// where it used to be a 500.
func TestNULCharacterIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := startStack(t, map[string]string{"PROCESSOR_WEBHOOK_SECRET": processorSecret})
	f := s.fixture()
	cid := s.click(f.codeA, nil)
	landing := "https://brand.example/landing?via=" + f.codeA
	const bad = "BadRequestError"

	routes := []struct {
		name, path string
		body       map[string]any
		headers    []string
		message    string
	}{
		{"click page_title", "/api/v1/track/click", map[string]any{"affiliate_url": landing, "page_title": "Pricing\x00"}, nil,
			"page_title must not contain the NUL character"},
		{"click session_id", "/api/v1/track/click", map[string]any{"affiliate_url": landing, "session_id": "\x00"}, nil,
			"session_id must not contain the NUL character"},
		{"click additional_data.event_name (nested)", "/api/v1/track/click", map[string]any{"affiliate_url": landing,
			"additional_data": map[string]any{"event_name": "a\x00"}}, nil, "additional_data.event_name must not contain the NUL character"},
		{"click affiliate_url: the spec's message", "/api/v1/track/click", map[string]any{"affiliate_url": landing + "\x00"}, nil,
			"Invalid affiliate_url"},
		{"click existing_click_id", "/api/v1/track/click", map[string]any{"affiliate_url": landing, "existing_click_id": cid + "\x00"}, nil,
			"existing_click_id must not contain the NUL character"},
		{"click code percent-encoded NUL", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/landing?aff=%00"}, nil,
			"Referral link not found"},
		{"click code percent-encoded invalid UTF-8", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/landing?via=" + f.codeA + "%80"}, nil,
			"Referral link not found"},
		{"click unknown field", "/api/v1/track/click", map[string]any{"affiliate_url": landing, "extra": []any{"ok", "\x00"}}, nil,
			"extra[1] must not contain the NUL character"},
		{"lead customer_key", "/api/v1/track/lead", map[string]any{"click_id": cid, "customer_key": "k\x00"}, bearer(f.keyServer),
			"customer_key must not contain the NUL character"},
		{"lead click_id", "/api/v1/track/lead", map[string]any{"click_id": cid + "\x00", "customer_key": "k"}, bearer(f.keyServer),
			"click_id must not contain the NUL character"},
		{"lead email", "/api/v1/track/lead", map[string]any{"click_id": cid, "email": "a\x00@b.example"}, bearer(f.keyServer),
			"email must not contain the NUL character"},
		{"visit page_url: the route's message", "/api/v1/track/visit", map[string]any{"program_id": fmt.Sprint(f.progBrowser), "page_url": "https://brand.example/\x00", "click_id": cid},
			[]string{"Origin", f.origin}, "page_url is required and must be an http or https URL"},
		{"visit session_id", "/api/v1/track/visit", map[string]any{"program_id": fmt.Sprint(f.progBrowser), "page_url": "https://brand.example/", "session_id": "s\x00"},
			[]string{"Origin", f.origin}, "session_id must not contain the NUL character"},
	}
	for _, tc := range routes {
		t.Run(tc.name, func(t *testing.T) {
			before, sales := s.rows(), s.saleRows()
			r := s.call("POST", tc.path, jsonBody(tc.body), tc.headers...)
			wantPlatformError(t, r, 400, bad, tc.message)
			if after := s.rows(); after != before {
				t.Fatalf("rows %v -> %v", before, after)
			}
			if after := s.saleRows(); after != sales {
				t.Fatalf("sale rows %v -> %v", sales, after)
			}
		})
	}

	t.Run("a valid click sent together with NUL ones still records", func(t *testing.T) {
		before := s.count(`SELECT count(*) FROM affiliate_click_events`)
		const n = 8
		var wg sync.WaitGroup
		replies := make([]reply, 2*n)
		for i := range 2 * n {
			body := map[string]any{"affiliate_url": landing, "page_title": fmt.Sprintf("page %d", i)}
			if i%2 == 1 {
				body["page_title"] = fmt.Sprintf("page %d\x00", i)
			}
			wg.Go(func() { replies[i] = s.call("POST", "/api/v1/track/click", jsonBody(body)) })
		}
		wg.Wait()
		for i, r := range replies {
			if i%2 == 1 {
				wantPlatformError(t, r, 400, bad, "page_title must not contain the NUL character")
			} else if r.status != 200 || r.body["click_id"] == nil {
				t.Fatalf("valid click %d: %d %s", i, r.status, r.raw)
			}
		}
		if got := s.count(`SELECT count(*) FROM affiliate_click_events`) - before; got != n {
			t.Fatalf("%d clicks recorded, want %d", got, n)
		}
	})
}

// The processor webhook stores the raw event as jsonb, which refuses
// U+0000, unpaired surrogates, invalid UTF-8 and numbers beyond numeric:
// each is a 400 that stores nothing (it was a 500 the processor retried).
func TestProcessorEventThatCannotBeStoredIsRefused(t *testing.T) {
	t.Parallel()
	s := startStack(t, map[string]string{"PROCESSOR_WEBHOOK_SECRET": processorSecret})
	f := s.fixture()
	const account = "acct_nul_program"
	s.admin("PATCH", fmt.Sprintf("/admin/v1/programs/%d", f.progServer), map[string]any{
		"processor_connection": map[string]any{"status": "connected", "account_id": account}})
	s.sync()
	cid := s.click(f.codeA, nil)
	good := func() []byte {
		b, _ := json.Marshal(processorEvent("checkout.session.completed", account,
			checkout(map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(f.progServer)}, nil)))
		return b
	}
	// withNote appends a "note" member to one good event. It marshals once:
	// two calls of good() differ in length now and then (their ids carry the
	// clock), and slicing one by the other's length made the body invalid
	// JSON, a flaky failure.
	withNote := func(note string) []byte {
		b := good()
		return []byte(string(b[:len(b)-1]) + `,"note":` + note + `}`)
	}
	send := func(body []byte) reply {
		return s.call("POST", httpapi.ProcessorWebhookPath, string(body), httpapi.SignatureHeader, httpapi.Sign(processorSecret, time.Now(), body))
	}
	events := func() int { return s.count(`SELECT count(*) FROM processor_events`) }
	nul := func(path string) []byte {
		ev := processorEvent("checkout.session.completed", account,
			checkout(map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(f.progServer)}, nil))
		switch path {
		case "metadata":
			ev["data"].(map[string]any)["object"].(map[string]any)["metadata"].(map[string]any)["svc_click_id"] = cid + "\x00"
		case "unused":
			ev["data"].(map[string]any)["object"].(map[string]any)["description"] = "\x00"
		case "id":
			ev["id"] = ev["id"].(string) + "\x00"
		}
		b, _ := json.Marshal(ev)
		return b
	}
	for _, tc := range []struct {
		name    string
		body    []byte
		message string
	}{
		{"NUL in metadata", nul("metadata"), "Invalid processor event: data.object.metadata.svc_click_id must not contain the NUL character"},
		{"NUL in a field not read", nul("unused"), "Invalid processor event: data.object.description must not contain the NUL character"},
		{"NUL in the event id", nul("id"), "Invalid processor event: id must not contain the NUL character"},
		{"unpaired surrogate", withNote(`"\ud800"`), "Invalid processor event: a \\u escape names an unpaired UTF-16 surrogate"},
		{"invalid UTF-8", withNote("\"\xff\""), "Invalid processor event: the body is not valid UTF-8"},
		{"number beyond numeric", withNote(`1e999999`), "Invalid processor event: numbers must be at most 400 characters with an exponent of at most 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, sales, stored := s.rows(), s.saleRows(), events()
			wantPlatformError(t, send(tc.body), 400, "BadRequestError", tc.message)
			if after := s.rows(); after != before {
				t.Fatalf("rows %v -> %v", before, after)
			}
			if after := s.saleRows(); after != sales {
				t.Fatalf("sale rows %v -> %v", sales, after)
			}
			if n := events(); n != stored {
				t.Fatalf("processor events %d -> %d", stored, n)
			}
		})
	}
	t.Run("a paired surrogate and a large but storable number are stored", func(t *testing.T) {
		stored := events()
		wantOutcome(t, send(withNote(`"\ud83d\ude00","big":1e300`)), "sale_recorded")
		if n := events(); n != stored+1 {
			t.Fatalf("processor events %d -> %d", stored, n)
		}
	})
}
