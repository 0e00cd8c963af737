package main

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestIsPublicRejectsNonVisitorRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true},
		{"81.2.69.160", true},
		{"100.128.0.1", true},
		{"127.0.0.1", false},
		{"10.1.2.3", false},
		{"172.16.5.4", false},
		{"192.168.1.1", false},
		{"100.64.0.1", false},
		{"169.254.1.1", false},
		{"192.0.2.10", false},
		{"198.51.100.7", false},
		{"203.0.113.9", false},
		{"198.18.0.1", false},
		{"0.1.2.3", false},
		{"224.0.0.1", false},
		{"250.1.1.1", false},
		{"2001:db8::1", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			if got := isPublic(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Fatalf("isPublic(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
}

func TestPublicIPsAreDistinctPublicAndRepeatable(t *testing.T) {
	t.Parallel()
	ips := publicIPs(5000, 42)
	if len(ips) != 5000 {
		t.Fatalf("got %d addresses, want 5000", len(ips))
	}
	seen := map[string]bool{}
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || !isPublic(a) {
			t.Fatalf("%q is not a public IPv4 address", s)
		}
		if seen[s] {
			t.Fatalf("%s handed out twice", s)
		}
		seen[s] = true
	}
	if !slices.Equal(ips, publicIPs(5000, 42)) {
		t.Fatal("the same seed gave different addresses")
	}
}

func TestNextAddrSpreadsRequestsEvenly(t *testing.T) {
	t.Parallel()
	w := newWorkload([]string{"a"}, 1, "http://localhost:3000", []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}, 0, 0)
	counts := map[string]int{}
	for range 301 {
		counts[w.nextAddr()]++
	}
	// 301 requests over 3 addresses: none used more than ceil(301/3) = 101.
	for ip, n := range counts {
		if n > 101 || n < 100 {
			t.Fatalf("%s used %d times, want 100 or 101 (%v)", ip, n, counts)
		}
	}
}

func TestGeneratorBodiesFollowTheClickContract(t *testing.T) {
	t.Parallel()
	codes := []string{"p01-link001", "p02-link002", "p03-link003"}
	w := newWorkload(codes, 7, "http://localhost:3000", publicIPs(16, 1), 0.3, 0.5)
	g := w.generator(9)
	const n = 4000
	var reused, withProgram, withIntProgram int
	for i := range n {
		c, err := g.next()
		if err != nil {
			t.Fatal(err)
		}
		// Only documented fields: the reference decodes strictly, as the
		// service does.
		var req referenceRequest
		dec := json.NewDecoder(bytes.NewReader(c.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			t.Fatalf("body %s: %v", c.body, err)
		}
		u, err := url.Parse(req.AffiliateURL)
		if err != nil {
			t.Fatalf("affiliate_url %q: %v", req.AffiliateURL, err)
		}
		code := u.Query().Get("via") + u.Query().Get("aff")
		if !slices.Contains(codes, code) {
			t.Fatalf("affiliate_url %q carries no known link code", req.AffiliateURL)
		}
		if !strings.HasPrefix(req.PageURL, "http://localhost:3000/") || req.UserAgent != c.userAgent || req.UserAgent == "" {
			t.Fatalf("page_url %q / user_agent %q do not match the request", req.PageURL, req.UserAgent)
		}
		if req.ExistingClickID != "" {
			reused++
			if !c.reused || !strings.HasPrefix(req.ExistingClickID, "cust_seen_") {
				t.Fatalf("existing_click_id %q was never returned by the target", req.ExistingClickID)
			}
		}
		if len(req.ProgramID) > 0 {
			withProgram++
			id, err := parseProgramID(req.ProgramID)
			if err != nil || id != 7 {
				t.Fatalf("program_id %s, want 7 as a number or numeric string", req.ProgramID)
			}
			if req.ProgramID[0] != '"' {
				withIntProgram++
			}
		}
		if i == 0 && req.ExistingClickID != "" {
			t.Fatal("the first click reused an id before any was returned")
		}
		g.observe("cust_seen_" + string(rune('a'+i%26)))
	}
	if share := float64(reused) / n; share < 0.25 || share > 0.35 {
		t.Fatalf("reuse share %.2f, want about 0.3", share)
	}
	if share := float64(withProgram) / n; share < 0.45 || share > 0.55 {
		t.Fatalf("program_id share %.2f, want about 0.5", share)
	}
	if withIntProgram == 0 || withIntProgram == withProgram {
		t.Fatal("program_id should be sent both as a number and as a numeric string")
	}
}

func TestObserveKeepsABoundedRing(t *testing.T) {
	t.Parallel()
	g := newWorkload([]string{"a"}, 1, "", []string{"1.1.1.1"}, 1, 0).generator(1)
	for i := range recentClickIDs * 3 {
		g.observe("id" + string(rune(i)))
	}
	g.observe("")
	if len(g.recent) != recentClickIDs {
		t.Fatalf("ring holds %d ids, want %d", len(g.recent), recentClickIDs)
	}
}
