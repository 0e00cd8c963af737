package server_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// POST /internal/v1/attributions/batch: each request of a batch is decided
// and answered exactly as the single route would answer it alone, whatever
// the others hold, and a batch refused whole writes nothing.
func TestAttributionBatch(t *testing.T) {
	t.Parallel()
	// 64 customers' clicks come from this test's one address.
	s := startStack(t, map[string]string{"INTERNAL_TOKEN": internalToken, "TRACK_CLICK_RATE_LIMIT": "1000"})
	f := s.fixture()
	cid := s.click(f.codeA, nil)
	now := time.Now()
	item := func(extra map[string]any) map[string]any {
		return attrBody(f.progServer, now, mergeInto(map[string]any{"click_id": cid}, extra))
	}
	attributed := item(nil)
	refusals := []any{
		item(map[string]any{"transaction_id": "txn\x00"}),
		item(map[string]any{"click_id": "cust_\x00"}),
		item(map[string]any{"currency": "GBP"}),
		item(map[string]any{"click_id": nil, "customer_key": "nobody-here"}),
		item(map[string]any{"program_id": 987654321}),
		nil,
		"not an object",
	}
	batch := func(items ...any) string {
		b, _ := json.Marshal(map[string]any{"requests": items})
		return string(b)
	}
	results := func(t *testing.T, r reply, n int) []map[string]any {
		t.Helper()
		d := decision(t, r)
		rs, _ := d["results"].([]any)
		if len(rs) != n {
			t.Fatalf("%d results, want %d: %s", len(rs), n, r.raw)
		}
		out := make([]map[string]any, n)
		for i, x := range rs {
			out[i], _ = x.(map[string]any)
		}
		return out
	}
	// alone is the single route's answer to body (a refusal writes
	// nothing, so asking it again changes nothing).
	alone := func(t *testing.T, body any) (float64, any) {
		t.Helper()
		b, _ := json.Marshal(body)
		r := s.call("POST", "/internal/v1/attributions", string(b), bearer(internalToken)...)
		var parsed any
		if err := json.Unmarshal([]byte(r.raw), &parsed); err != nil {
			t.Fatalf("%s: %v", r.raw, err)
		}
		return float64(r.status), parsed
	}

	t.Run("a decision among refusals: each answered as alone, only the decision written", func(t *testing.T) {
		before, beforeAttr := s.rows(), s.attrRows()
		r := s.call("POST", "/internal/v1/attributions/batch", batch(append([]any{attributed}, refusals...)...), bearer(internalToken)...)
		got := results(t, r, 1+len(refusals))
		wantStatuses := []float64{200, 400, 400, 400, 404, 400, 400, 400}
		for i, res := range got {
			if res["status"] != wantStatuses[i] {
				t.Errorf("result %d: status %v, want %v: %v", i, res["status"], wantStatuses[i], res)
			}
		}
		d, _ := got[0]["body"].(map[string]any)["data"].(map[string]any)
		if d["outcome"] != "attributed" || d["click_id"] != cid || d["partner_id"] != float64(f.partner1) || d["replayed"] != false {
			t.Fatalf("the decision: %v", got[0])
		}
		for i, body := range refusals {
			status, want := alone(t, body)
			if got[i+1]["status"] != status || !reflect.DeepEqual(got[i+1]["body"], want) {
				t.Errorf("request %d: batch answered %v %v, alone %v %v", i+1, got[i+1]["status"], got[i+1]["body"], status, want)
			}
		}
		// One decision, one converted customer and its event more.
		want, wantAttr := before, beforeAttr
		want[4]++
		wantAttr[0]++
		wantAttr[2]++
		wantAttr[4]++
		if after, afterAttr := s.rows(), s.attrRows(); after != want || afterAttr != wantAttr {
			t.Fatalf("rows %v %v -> %v %v, want %v %v", before, beforeAttr, after, afterAttr, want, wantAttr)
		}
		if s.customer(cid).status != "conversion" {
			t.Fatal("the attributed customer did not convert")
		}
	})

	t.Run("the same request again: replayed, nothing written", func(t *testing.T) {
		before := s.attrRows()
		got := results(t, s.call("POST", "/internal/v1/attributions/batch", batch(attributed), bearer(internalToken)...), 1)
		d, _ := got[0]["body"].(map[string]any)["data"].(map[string]any)
		if got[0]["status"] != float64(200) || d["outcome"] != "attributed" || d["replayed"] != true {
			t.Fatalf("%v", got[0])
		}
		if after := s.attrRows(); after != before {
			t.Fatalf("a replay wrote rows: %v -> %v", before, after)
		}
	})

	t.Run("a batch refused whole writes nothing", func(t *testing.T) {
		const msg = "requests is required: an array of 1 to 64 attribution requests"
		fresh := item(nil)
		tooMany := make([]any, 65)
		for i := range tooMany {
			tooMany[i] = item(nil)
		}
		rows := []struct {
			name, body string
			headers    []string
			status     int
			errName    string
			code       string
			message    string
		}{
			{"no Authorization", batch(fresh), []string{}, 401, "UnauthorizedError", "unauthorized", "Missing or malformed Authorization header. Expected: Bearer <internal_token>"},
			{"wrong token", batch(fresh), bearer("tracking-test-internal-tokeN"), 401, "UnauthorizedError", "unauthorized", "Invalid internal token"},
			{"not JSON", "{", bearer(internalToken), 400, "BadRequestError", "invalid_request", msg},
			{"an array", "[" + jsonBody(fresh) + "]", bearer(internalToken), 400, "BadRequestError", "invalid_request", msg},
			{"no requests", `{"request":[]}`, bearer(internalToken), 400, "BadRequestError", "invalid_request", msg},
			{"requests empty", `{"requests":[]}`, bearer(internalToken), 400, "BadRequestError", "invalid_request", msg},
			{"requests an object", `{"requests":` + jsonBody(fresh) + `}`, bearer(internalToken), 400, "BadRequestError", "invalid_request", msg},
			{"65 requests", batch(tooMany...), bearer(internalToken), 400, "BadRequestError", "invalid_request", msg},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				before, beforeAttr := s.rows(), s.attrRows()
				r := s.call("POST", "/internal/v1/attributions/batch", row.body, row.headers...)
				wantCodedError(t, r, row.status, row.errName, row.code, row.message)
				if after, afterAttr := s.rows(), s.attrRows(); after != before || afterAttr != beforeAttr {
					t.Fatalf("refused batch wrote rows: %v %v -> %v %v", before, beforeAttr, after, afterAttr)
				}
			})
		}
		t.Run("not JSON's media type", func(t *testing.T) {
			r := s.call("POST", "/internal/v1/attributions/batch", batch(fresh), "Authorization", "Bearer "+internalToken, "Content-Type", "text/plain")
			wantCodedError(t, r, 400, "BadRequestError", "invalid_request", "Content-Type must be application/json")
		})
	})

	t.Run("64 requests of fresh customers: each decided once", func(t *testing.T) {
		items := make([]any, 64)
		cids := make([]string, 64)
		for i := range items {
			cids[i] = s.click(f.codeA, nil)
			items[i] = attrBody(f.progServer, now, map[string]any{"click_id": cids[i]})
		}
		before := s.attrRows()
		got := results(t, s.call("POST", "/internal/v1/attributions/batch", batch(items...), bearer(internalToken)...), 64)
		for i, res := range got {
			d, _ := res["body"].(map[string]any)["data"].(map[string]any)
			if res["status"] != float64(200) || d["outcome"] != "attributed" || d["click_id"] != cids[i] {
				t.Fatalf("result %d: %v", i, res)
			}
		}
		if after := s.attrRows(); after[0] != before[0]+64 {
			t.Fatalf("decisions %d -> %d, want 64 more", before[0], after[0])
		}
	})
}
