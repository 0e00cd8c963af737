package enrich_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/svc-dev/svc/services/tracking/internal/ingest/enrich"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/enrich/enrichtest"
)

// BenchmarkEnrich measures the click hot path: one geo lookup and one
// User-Agent parse per click, against a mix of real browser and crawler UAs.
// "cached" runs are answered from the UA cache after the first pass over the
// mix; "uncached" runs parse every time (cache disabled); "cache miss" sends
// a new UA every time, the worst case a bot rotating agents can force.
func BenchmarkEnrich(b *testing.B) {
	dir := b.TempDir()
	small := filepath.Join(dir, "small.mmdb")
	enrichtest.WriteTestDB(b, small, enrichtest.SampleRecords())
	large := filepath.Join(dir, "large.mmdb")
	enrichtest.WriteTestDB(b, large, largeRecords())

	var uas []string
	for _, tc := range uaCases() {
		if tc.ua != "" && tc.ua != "   " {
			uas = append(uas, tc.ua)
		}
	}
	ips := []netip.Addr{
		netip.MustParseAddr("81.2.69.160"),
		netip.MustParseAddr("216.160.83.56"),
		netip.MustParseAddr("2001:218::1"),
		netip.MustParseAddr("8.8.8.8"),
	}
	largeIPs := []netip.Addr{
		netip.MustParseAddr("10.17.3.9"),
		netip.MustParseAddr("10.100.77.1"),
		netip.MustParseAddr("2001:db8:1234::1"),
		netip.MustParseAddr("8.8.8.8"),
	}

	benches := []struct {
		name  string
		cfg   enrich.Config
		ips   []netip.Addr
		ua    func(i int) string
		noGeo bool
	}{
		{name: "geo only", cfg: enrich.Config{GeoIPPath: small}, ips: ips, ua: func(int) string { return "" }},
		{name: "geo only large db", cfg: enrich.Config{GeoIPPath: large}, ips: largeIPs, ua: func(int) string { return "" }},
		{name: "ua uncached", cfg: enrich.Config{UACacheSize: -1}, noGeo: true, ua: func(i int) string { return uas[i%len(uas)] }},
		{name: "ua cached", cfg: enrich.Config{}, noGeo: true, ua: func(i int) string { return uas[i%len(uas)] }},
		{name: "ua cache miss", cfg: enrich.Config{}, noGeo: true, ua: func(i int) string { return uas[i%len(uas)] + " r/" + strconv.Itoa(i) }},
		{name: "geo+ua uncached", cfg: enrich.Config{GeoIPPath: small, UACacheSize: -1}, ips: ips, ua: func(i int) string { return uas[i%len(uas)] }},
		{name: "geo+ua cached", cfg: enrich.Config{GeoIPPath: small}, ips: ips, ua: func(i int) string { return uas[i%len(uas)] }},
	}
	for _, bb := range benches {
		e := newEnricher(b, bb.cfg)
		ipAt := func(i int) netip.Addr {
			if bb.noGeo {
				return netip.Addr{}
			}
			return bb.ips[i%len(bb.ips)]
		}
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e.Enrich(ipAt(i), bb.ua(i))
				i++
			}
		})
		b.Run(bb.name+" parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					e.Enrich(ipAt(i), bb.ua(i))
					i++
				}
			})
		})
	}
}

// largeRecords approximates a real City database's tree depth and data
// section better than the sample: 32,768 IPv4 /24s and 8,192 IPv6 /48s, each
// with its own city.
func largeRecords() []enrichtest.Record {
	recs := make([]enrichtest.Record, 0, 1<<15+1<<13)
	for i := range 1 << 15 {
		recs = append(recs, enrichtest.Record{
			Network: fmt.Sprintf("10.%d.%d.0/24", i>>8, i&0xff),
			Country: "US", Region: "CA", RegionName: "California",
			City: "City " + strconv.Itoa(i),
		})
	}
	for i := range 1 << 13 {
		recs = append(recs, enrichtest.Record{
			Network: fmt.Sprintf("2001:db8:%x::/48", i),
			Country: "DE", Region: "BE", RegionName: "Berlin",
			City: "Stadt " + strconv.Itoa(i),
		})
	}
	return recs
}
