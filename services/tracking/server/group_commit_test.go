package server_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/obs/obstest"
)

// Concurrent attribution calls share one transaction (pg.Group): rounds
// of concurrent calls (fresh customers, a replay of a stored decision, a
// customer of another program, an unknown click id) until a transaction
// carried more than one call, each answer the one the call alone gets,
// and only the attributed calls stored.
func TestAttributionsDecidedTogether(t *testing.T) {
	t.Parallel()
	s := startStack(t, map[string]string{"INTERNAL_TOKEN": internalToken})
	f := s.fixture()
	stored := s.cid(f)
	storedBody := attrBody(f.progServer, time.Now(), map[string]any{"click_id": stored})
	first := s.wantAttributed(t, s.attribute(storedBody), stored, f.partner1, "conversion", false)
	deadline := time.Now().Add(60 * time.Second)
	reg := s.registry
	// Some committed transaction carried more than one call.
	grouped := func() bool {
		return obstest.HistogramSum(t, reg, "db_group_commit_calls", "write", "attribution") > obstest.Metric(t, reg, "db_group_commit_calls", "write", "attribution")
	}
	for round := 0; !grouped(); round++ {
		if time.Now().After(deadline) {
			t.Fatalf("no transaction carried more than one call in %d rounds", round)
		}
		type call struct {
			body map[string]any
			cid  string
			want string // attributed, replayed, refused, unknown
		}
		var calls []call
		for range 10 {
			cid := s.cid(f)
			calls = append(calls, call{attrBody(f.progServer, time.Now(), map[string]any{"click_id": cid}), cid, "attributed"})
		}
		other := s.cid(f)
		calls = append(calls,
			call{storedBody, stored, "replayed"},
			call{attrBody(f.progBrowser, time.Now(), map[string]any{"click_id": other}), other, "refused"},
			call{attrBody(f.progServer, time.Now(), map[string]any{"click_id": "cust_9_" + strconv.Itoa(round)}), "", "unknown"},
		)
		before := s.attrRows()
		replies := make([]reply, len(calls))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range calls {
			wg.Go(func() {
				<-start
				replies[i] = s.attribute(c.body)
			})
		}
		close(start)
		wg.Wait()
		for i, c := range calls {
			switch r := replies[i]; c.want {
			case "attributed":
				s.wantAttributed(t, r, c.cid, f.partner1, "conversion", false)
			case "replayed":
				if d := s.wantAttributed(t, r, c.cid, f.partner1, "conversion", true); d["transaction_id"] != first["transaction_id"] {
					t.Fatalf("replay %v, first %v", d, first)
				}
			case "refused":
				wantRefused(t, r, c.cid, "No affiliate attribution found for this customer in this program", false)
			default:
				wantCodedError(t, r, 404, "NotFoundError", "customer_not_found", "Customer not found. Provide customer_key or click_id.")
			}
		}
		// Ten decisions, ten converted customers and their events.
		if after, want := s.attrRows(), [5]int{before[0] + 10, before[1], before[2] + 10, before[3], before[4] + 10}; after != want {
			t.Fatalf("rows %v -> %v, want %v", before, after, want)
		}
	}
}

// cid is a fresh customer of program progServer through link codeA.
func (s *stack) cid(f fixture) string { return s.click(f.codeA, nil) }
