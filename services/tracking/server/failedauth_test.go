package server_test

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// lookups reads apikey_lookups_total{outcome} from tracking's /metrics.
func (s *stack) lookups(outcome string) int {
	s.t.Helper()
	resp, err := http.Get(s.tracking + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	prefix := `apikey_lookups_total{outcome="` + outcome + `"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				s.t.Fatalf("%s: %v", sc.Text(), err)
			}
			return int(n)
		}
	}
	return 0
}

func randomToken() string { return "svc_live_" + rand.Text() }

// Drill 6 of "Survive faults": 10,000 requests with random Bearer tokens
// from one client IP. After the failed-auth allowance every answer is the
// typed 429, none of them looks a key up, and no bucket is made per token;
// a valid key from another IP gets its normal answer from its own,
// untouched bucket. The services run on a fake clock standing still inside
// one window, so the count is exact whatever the wall clock does.
func TestDrillRandomBearerTokensFromOneIP(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(time.Now().Truncate(time.Minute).Add(time.Second))
	s := startStackOn(t, clock, nil)
	f := s.fixture()
	cid := s.click(f.codeA, nil)
	const allowance = 30 // FAILED_AUTH_RATE_LIMIT's default
	const attacker, brand = "203.0.113.66", "198.51.100.20"

	// The brand's valid key, from its own IP, before the flood.
	first := s.sale(saleBody(cid, map[string]any{"additional_data": map[string]any{"test_mode": true}}), append(bearer(f.keyServer), "X-Forwarded-For", brand)...)
	if first.status != 200 || first.header.Get("X-RateLimit-Limit") != "120" || first.header.Get("X-RateLimit-Remaining") != "119" {
		t.Fatalf("valid key before the flood: %d %v %s", first.status, first.header, first.raw)
	}
	before := s.lookups("invalid")

	start := time.Now()
	var unauthorized, limited int
	for i := range 10_000 {
		r := s.call("POST", "/api/v1/track/sale", `{"transaction_id":"t","amount_cents":1,"currency":"USD"}`,
			"Authorization", "Bearer "+randomToken(), "X-Forwarded-For", attacker)
		switch {
		case i < allowance:
			e, _ := r.body["error"].(map[string]any)
			if r.status != 401 || e["message"] != "Invalid API token" || r.header.Get("X-RateLimit-Limit") != strconv.Itoa(allowance) ||
				r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(allowance-1-i) {
				t.Fatalf("guess %d: %d %v %s", i, r.status, r.header, r.raw)
			}
			unauthorized++
		default:
			e, _ := r.body["error"].(map[string]any)
			if r.status != 429 || e["code"] != "rate_limited" || e["status"] != float64(429) || e["retry_after_seconds"] != float64(59) ||
				r.header.Get("Retry-After") != "59" || r.header.Get("X-RateLimit-Limit") != strconv.Itoa(allowance) ||
				r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("X-RateLimit-Reset") == "" || r.header.Get("X-Request-ID") == "" || hasData(r) {
				t.Fatalf("guess %d: %d %v %s", i, r.status, r.header, r.raw)
			}
			limited++
		}
	}
	elapsed := time.Since(start)
	if got := s.lookups("invalid") - before; got != allowance {
		t.Fatalf("%d key lookups for 10,000 guesses, want %d (the allowance)", got, allowance)
	}
	t.Logf("10,000 guesses in %v: %d answered 401, %d answered 429, %d key lookups", elapsed.Round(time.Millisecond), unauthorized, limited, allowance)

	t.Run("the attacker's IP is refused before the lookup even with a valid key", func(t *testing.T) {
		ok := s.lookups("ok")
		r := s.sale(saleBody(cid, nil), append(bearer(f.keyServer), "X-Forwarded-For", attacker)...)
		if r.status != 429 || s.lookups("ok") != ok {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("a valid key from another IP is unaffected and its bucket untouched", func(t *testing.T) {
		r := s.sale(saleBody(cid, map[string]any{"additional_data": map[string]any{"test_mode": true}}), append(bearer(f.keyServer), "X-Forwarded-For", brand)...)
		if r.status != 200 || r.header.Get("X-RateLimit-Limit") != "120" || r.header.Get("X-RateLimit-Remaining") != "118" {
			t.Fatalf("%d %v %s", r.status, r.header, r.raw)
		}
	})
	t.Run("an IPv6 attacker rotating addresses inside its /64 shares one allowance", func(t *testing.T) {
		var statuses []int
		for i := range allowance + 5 {
			r := s.call("POST", "/api/v1/track/sale", `{}`, "Authorization", "Bearer "+randomToken(),
				"X-Forwarded-For", fmt.Sprintf("2001:db8:77:1:%x::1", i+1))
			statuses = append(statuses, r.status)
		}
		for i, st := range statuses {
			if want := map[bool]int{true: 401, false: 429}[i < allowance]; st != want {
				t.Fatalf("request %d: %d, want %d (%v)", i, st, want, statuses)
			}
		}
		r := s.call("POST", "/api/v1/track/sale", `{}`, "Authorization", "Bearer "+randomToken(), "X-Forwarded-For", "2001:db8:77:2::1")
		if r.status != 401 {
			t.Fatalf("the next /64: %d %s", r.status, r.raw)
		}
	})
	t.Run("the next window gives the allowance back", func(t *testing.T) {
		clock.Advance(time.Minute)
		r := s.call("POST", "/api/v1/track/sale", `{}`, "Authorization", "Bearer "+randomToken(), "X-Forwarded-For", attacker)
		if r.status != 401 || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(allowance-1) {
			t.Fatalf("%d %v %s", r.status, r.header, r.raw)
		}
	})
}

func hasData(r reply) bool {
	_, ok := r.body["data"]
	return ok
}
