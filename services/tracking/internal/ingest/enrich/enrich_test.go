package enrich_test

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/oschwald/maxminddb-golang/v2"

	"github.com/svc-dev/svc/services/tracking/internal/ingest/enrich"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/enrich/enrichtest"
)

// Real User-Agent strings, as browsers and crawlers send them.
const (
	uaChromeWindows  = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
	uaSafariIPhone   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	uaSafariIPad     = "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1"
	uaChromeAndroid  = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36"
	uaChromeAndroidT = "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
	uaFirefoxLinux   = "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0"
	uaGooglebot      = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	uaGooglebotPhone = "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	uaEdgeWindows    = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.80"
	uaSafariMac      = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Safari/605.1.15"
	uaSamsungPhone   = "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36"
	uaChromeIOS      = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/124.0.6367.88 Mobile/15E148 Safari/604.1"
	uaFirefoxAndroid = "Mozilla/5.0 (Android 14; Mobile; rv:125.0) Gecko/125.0 Firefox/125.0"
	uaFirefoxTablet  = "Mozilla/5.0 (Android 14; Tablet; rv:125.0) Gecko/125.0 Firefox/125.0"
	uaFacebookApp    = "Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/UQ1A.240205.004; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/124.0.6367.82 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/460.0.0.48.109;]"
	uaChromeOS       = "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
	uaIE11           = "Mozilla/5.0 (Windows NT 6.1; WOW64; Trident/7.0; rv:11.0) like Gecko"
	uaHeadless       = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.0.0 Safari/537.36"
	uaBingbot        = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"
	uaFacebookHit    = "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"
	uaCurl           = "curl/8.5.0"
)

type uaCase struct {
	name, ua                string
	device, os, browserName string
}

func uaCases() []uaCase {
	return []uaCase{
		{"chrome desktop windows", uaChromeWindows, enrich.DeviceDesktop, "Windows", "Chrome"},
		{"safari iphone", uaSafariIPhone, enrich.DeviceMobile, "iOS", "Safari"},
		{"safari ipad", uaSafariIPad, enrich.DeviceTablet, "iOS", "Safari"},
		{"chrome android phone", uaChromeAndroid, enrich.DeviceMobile, "Android", "Chrome"},
		{"chrome android tablet without Mobile token", uaChromeAndroidT, enrich.DeviceTablet, "Android", "Chrome"},
		{"firefox linux", uaFirefoxLinux, enrich.DeviceDesktop, "Linux", "Firefox"},
		{"googlebot", uaGooglebot, enrich.DeviceBot, "", "Googlebot"},
		{"googlebot smartphone is a bot", uaGooglebotPhone, enrich.DeviceBot, "Android", "Googlebot"},
		{"edge windows", uaEdgeWindows, enrich.DeviceDesktop, "Windows", "Edge"},
		{"safari mac", uaSafariMac, enrich.DeviceDesktop, "macOS", "Safari"},
		{"samsung internet phone", uaSamsungPhone, enrich.DeviceMobile, "Android", "Samsung Browser"},
		{"chrome ios", uaChromeIOS, enrich.DeviceMobile, "iOS", "Chrome"},
		{"firefox android phone", uaFirefoxAndroid, enrich.DeviceMobile, "Android", "Firefox"},
		{"firefox android tablet", uaFirefoxTablet, enrich.DeviceTablet, "Android", "Firefox"},
		{"facebook in-app browser", uaFacebookApp, enrich.DeviceMobile, "Android", "Facebook App"},
		{"chromebook", uaChromeOS, enrich.DeviceDesktop, "ChromeOS", "Chrome"},
		{"internet explorer 11", uaIE11, enrich.DeviceDesktop, "Windows", "Internet Explorer"},
		{"headless chrome is a bot", uaHeadless, enrich.DeviceBot, "Linux", "Headless Chrome"},
		{"bingbot", uaBingbot, enrich.DeviceBot, "", "Bingbot"},
		{"facebook link preview", uaFacebookHit, enrich.DeviceBot, "", "facebookexternalhit"},
		{"curl has no device", uaCurl, "", "", "curl"},
		{"empty", "", "", "", ""},
		{"blank", "   ", "", "", ""},
	}
}

func TestEnrichUserAgent(t *testing.T) {
	sizes := []struct {
		name string
		size int
	}{
		{"default cache", 0},
		{"no cache", -1},
		{"one-entry cache", 1},
	}
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) {
			e := newEnricher(t, enrich.Config{UACacheSize: sz.size})
			// Twice: the second pass is answered from the cache when there
			// is one, and must say the same.
			for pass := range 2 {
				for _, tc := range uaCases() {
					got := e.Enrich(netip.Addr{}, tc.ua)
					want := enrich.Info{DeviceType: tc.device, OS: tc.os, Browser: tc.browserName}
					if got != want {
						t.Errorf("pass %d, %s: Enrich(%q) = %+v, want %+v", pass, tc.name, tc.ua, got, want)
					}
				}
			}
		})
	}
}

func TestEnrichUserAgentHostileInput(t *testing.T) {
	tests := []struct {
		name string
		ua   string
	}{
		{"control bytes and invalid utf-8", "bad\x00agent\xff\xfe/1.0"},
		{"unknown single token", "x\x01y"},
		{"very long", strings.Repeat("Mozilla/5.0 (Windows NT 10.0) ", 10_000)},
		{"long unknown", strings.Repeat("z", 5000)},
		{"truncation splits a rune", strings.Repeat("a", 1023) + "é and more"},
	}
	e := newEnricher(t, enrich.Config{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.Enrich(netip.Addr{}, tc.ua)
			for field, v := range map[string]string{"device": got.DeviceType, "os": got.OS, "browser": got.Browser} {
				if !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) || len(v) > 64 {
					t.Errorf("%s = %q: want valid UTF-8 without control characters, at most 64 bytes", field, v)
				}
			}
		})
	}
}

func TestEnrichGeo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "city.mmdb")
	enrichtest.WriteTestDB(t, path, enrichtest.SampleRecords())
	e := newEnricher(t, enrich.Config{GeoIPPath: path})

	tests := []struct {
		name                  string
		ip                    string
		country, region, city string
	}{
		{"ipv4 with subdivision code", "81.2.69.160", "GB", "ENG", "London"},
		{"ipv4 second network", "216.160.83.56", "US", "WA", "Milton"},
		{"region falls back to the english name", "89.160.20.112", "SE", "Östergötland County", "Linköping"},
		{"ipv6", "2001:218::1", "JP", "13", "Tokyo"},
		{"country only", "2a02:cf40::7", "NO", "", ""},
		{"ipv4-mapped ipv6 looked up as ipv4", "::ffff:81.2.69.160", "GB", "ENG", "London"},
		{"ipv6 zone ignored", "2001:218::1%eth0", "JP", "13", "Tokyo"},
		{"unknown ipv4", "8.8.8.8", "", "", ""},
		{"unknown ipv6", "2606:4700::1111", "", "", ""},
		{"loopback not in the sample", "127.0.0.1", "", "", ""},
		{"invalid address", "", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ip netip.Addr
			if tc.ip != "" {
				ip = netip.MustParseAddr(tc.ip)
			}
			got := e.Enrich(ip, uaChromeWindows)
			want := enrich.Info{Country: tc.country, Region: tc.region, City: tc.city, DeviceType: "desktop", OS: "Windows", Browser: "Chrome"}
			if got != want {
				t.Errorf("Enrich(%s) = %+v, want %+v", tc.ip, got, want)
			}
		})
	}

	info, ok := e.GeoDB()
	if !ok || info.Path != path || info.Type != "GeoLite2-City" || info.IPVersion != 6 || info.BuildTime.IsZero() {
		t.Errorf("GeoDB() = %+v, %v: want the opened database's path, type GeoLite2-City, ip version 6 and a build time", info, ok)
	}
}

func TestEnrichGeoLoopbackWhenMapped(t *testing.T) {
	// Integration tests give 127.0.0.1 a location to see geo end to end.
	path := filepath.Join(t.TempDir(), "city.mmdb")
	enrichtest.WriteTestDB(t, path, []enrichtest.Record{
		{Network: "127.0.0.0/8", Country: "DE", Region: "BE", City: "Berlin"},
		{Network: "::1/128", Country: "DE", Region: "BE", City: "Berlin"},
	})
	e := newEnricher(t, enrich.Config{GeoIPPath: path})
	for _, ip := range []string{"127.0.0.1", "::1"} {
		got := e.Enrich(netip.MustParseAddr(ip), "")
		if want := (enrich.Info{Country: "DE", Region: "BE", City: "Berlin"}); got != want {
			t.Errorf("Enrich(%s) = %+v, want %+v", ip, got, want)
		}
	}
}

func TestEnrichGeoIPv4OnlyDatabase(t *testing.T) {
	// An IPv4-only database cannot answer for IPv6 visitors: that is "no
	// location", not a failure.
	path := filepath.Join(t.TempDir(), "v4.mmdb")
	writeRawDB(t, path, mmdbwriter.Options{DatabaseType: "GeoIP2-Country", IPVersion: 4, RecordSize: 24}, map[string]mmdbtype.Map{
		"81.2.69.0/24": {"country": mmdbtype.Map{"iso_code": mmdbtype.String("GB")}},
	})
	e := newEnricher(t, enrich.Config{GeoIPPath: path})

	tests := []struct {
		ip, country string
	}{
		{"81.2.69.1", "GB"},
		{"::ffff:81.2.69.1", "GB"},
		{"2001:218::1", ""},
	}
	for _, tc := range tests {
		if got := e.Enrich(netip.MustParseAddr(tc.ip), "").Country; got != tc.country {
			t.Errorf("Enrich(%s).Country = %q, want %q", tc.ip, got, tc.country)
		}
	}
}

func TestEnrichWithoutGeoDatabase(t *testing.T) {
	e := newEnricher(t, enrich.Config{})
	got := e.Enrich(netip.MustParseAddr("81.2.69.160"), uaSafariIPhone)
	want := enrich.Info{DeviceType: "mobile", OS: "iOS", Browser: "Safari"}
	if got != want {
		t.Errorf("Enrich = %+v, want %+v", got, want)
	}
	if info, ok := e.GeoDB(); ok {
		t.Errorf("GeoDB() = %+v, true: want false without a database", info)
	}
}

func TestNewRejectsUnusableGeoDatabase(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.mmdb")
	enrichtest.WriteTestDB(t, valid, enrichtest.SampleRecords())
	validBytes, err := os.ReadFile(valid)
	if err != nil {
		t.Fatal(err)
	}

	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The search tree starts the file: pointing its first nodes past the
	// end of the data keeps the metadata readable (Open succeeds) but
	// breaks every lookup that walks through them.
	brokenTree := append([]byte(nil), validBytes...)
	for i := range 64 {
		brokenTree[i] = 0xff
	}
	asn := filepath.Join(dir, "asn.mmdb")
	if err := enrichtest.WriteDB(asn, "GeoLite2-ASN", enrichtest.SampleRecords()); err != nil {
		t.Fatal(err)
	}
	// Another vendor's "country" database with a flat layout: the type
	// passes, every lookup would fail to decode.
	flat := filepath.Join(dir, "flat.mmdb")
	writeRawDB(t, flat, mmdbwriter.Options{DatabaseType: "ipinfo country.mmdb"}, map[string]mmdbtype.Map{
		"81.2.69.0/24": {"country": mmdbtype.String("GB"), "city": mmdbtype.String("London")},
	})
	empty := filepath.Join(dir, "no-networks.mmdb")
	enrichtest.WriteTestDB(t, empty, nil)

	tests := []struct {
		name string
		path string
	}{
		{"missing file", filepath.Join(dir, "nope.mmdb")},
		{"directory", dir},
		{"empty file", write("empty.mmdb", nil)},
		{"not a database", write("junk.mmdb", []byte(strings.Repeat("not an mmdb file\n", 100)))},
		{"truncated", write("truncated.mmdb", validBytes[:len(validBytes)/2])},
		{"corrupt search tree", write("corrupt.mmdb", brokenTree)},
		{"asn database", asn},
		{"foreign record layout", flat},
		{"no networks", empty},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := enrich.New(enrich.Config{GeoIPPath: tc.path})
			if err == nil {
				_ = e.Close()
				t.Fatalf("New(%s) succeeded: want an error", tc.path)
			}
			t.Logf("New error: %v", err)
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("New error %q does not name the path %s", err, tc.path)
			}
		})
	}
}

func TestEnrichConcurrentUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "city.mmdb")
	enrichtest.WriteTestDB(t, path, enrichtest.SampleRecords())
	// A cache smaller than the corpus keeps evicting while goroutines read.
	e := newEnricher(t, enrich.Config{GeoIPPath: path, UACacheSize: 4})
	cases := uaCases()
	ips := []struct {
		ip      netip.Addr
		country string
	}{
		{netip.MustParseAddr("81.2.69.160"), "GB"},
		{netip.MustParseAddr("2001:218::1"), "JP"},
		{netip.MustParseAddr("8.8.8.8"), ""},
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				tc := cases[(g+i)%len(cases)]
				loc := ips[(g*7+i)%len(ips)]
				got := e.Enrich(loc.ip, tc.ua)
				if got.Country != loc.country || got.DeviceType != tc.device || got.OS != tc.os || got.Browser != tc.browserName {
					t.Errorf("Enrich(%s, %s) = %+v", loc.ip, tc.name, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestNilAndClosedEnricher(t *testing.T) {
	var nilE *enrich.Enricher
	if got := nilE.Enrich(netip.MustParseAddr("81.2.69.160"), uaChromeWindows); got != (enrich.Info{}) {
		t.Errorf("nil Enricher: Enrich = %+v, want empty", got)
	}
	if err := nilE.Close(); err != nil {
		t.Errorf("nil Enricher: Close = %v", err)
	}

	path := filepath.Join(t.TempDir(), "city.mmdb")
	enrichtest.WriteTestDB(t, path, enrichtest.SampleRecords())
	e, err := enrich.New(enrich.Config{GeoIPPath: path})
	if err != nil {
		t.Fatal(err)
	}
	// Requests that outlive the shutdown grace may still be enriching
	// while Close runs: they must see either the location or none, never
	// crash (run with -race).
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 2000 {
			got := e.Enrich(netip.MustParseAddr("81.2.69.160"), uaChromeWindows)
			if got.Country != "GB" && got.Country != "" {
				t.Errorf("Enrich during Close: country %q", got.Country)
				return
			}
		}
	})
	if err := e.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	got := e.Enrich(netip.MustParseAddr("81.2.69.160"), uaChromeWindows)
	if want := (enrich.Info{DeviceType: "desktop", OS: "Windows", Browser: "Chrome"}); got != want {
		t.Errorf("Enrich after Close = %+v, want %+v (no geo, user agent still parsed)", got, want)
	}
	if _, ok := e.GeoDB(); ok {
		t.Error("GeoDB() after Close: want false")
	}
}

func TestVerifyGeoDB(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.mmdb")
	enrichtest.WriteTestDB(t, valid, enrichtest.SampleRecords())
	data, err := os.ReadFile(valid)
	if err != nil {
		t.Fatal(err)
	}
	r, err := maxminddb.Open(valid)
	if err != nil {
		t.Fatal(err)
	}
	treeSize := r.Metadata.NodeCount * r.Metadata.RecordSize / 4
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// The 16 zero bytes between the search tree and the data section are
	// never read by a lookup, so New accepts this file; only the full
	// verification notices.
	badSeparator := append([]byte(nil), data...)
	badSeparator[treeSize+3] = 0x42
	damaged := filepath.Join(dir, "damaged.mmdb")
	if err := os.WriteFile(damaged, badSeparator, 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		path      string
		newOK     bool
		verifyErr bool
	}{
		{"valid database", valid, true, false},
		{"damage past the sampled records", damaged, true, true},
		{"missing file", filepath.Join(dir, "nope.mmdb"), false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := enrich.New(enrich.Config{GeoIPPath: tc.path})
			if (err == nil) != tc.newOK {
				t.Errorf("New error = %v, want success %v", err, tc.newOK)
			}
			if err == nil {
				_ = e.Close()
			}
			err = enrich.VerifyGeoDB(tc.path)
			if (err != nil) != tc.verifyErr {
				t.Errorf("VerifyGeoDB error = %v, want error %v", err, tc.verifyErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.path) {
				t.Errorf("VerifyGeoDB error %q does not name the path", err)
			}
		})
	}
}

// writeRawDB writes a database with arbitrary records, for layouts the
// enrichtest helper does not produce.
func writeRawDB(t *testing.T, path string, opts mmdbwriter.Options, records map[string]mmdbtype.Map) {
	t.Helper()
	opts.Description = map[string]string{"en": "raw test database"}
	tree, err := mmdbwriter.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for cidr, rec := range records {
		_, network, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(network, rec); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func newEnricher(t testing.TB, cfg enrich.Config) *enrich.Enricher {
	t.Helper()
	e, err := enrich.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}
