package sources_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/svc-dev/svc/services/analytics/internal/sources"
)

func TestFromClick(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		page, ref, country, device string
		want                       sources.Dims
	}{
		{"a partner's blog post with UTM tags", "https://www.Brand.example/pricing?via=ABC&utm_source=Newsletter&utm_medium=email&utm_campaign=Spring%2026#top",
			"https://www.blog.example/post/1", "de", "Mobile",
			sources.Dims{"referrers": "blog.example", "utm_sources": "newsletter", "utm_mediums": "email", "utm_campaigns": "spring 26",
				"landing_pages": "brand.example/pricing", "countries": "DE", "devices": "mobile"}},
		{"typed in: no referrer, no tags, the home page", "https://brand.example?via=ABC", "", "", "",
			sources.Dims{"referrers": "(direct)", "utm_sources": "(none)", "utm_mediums": "(none)", "utm_campaigns": "(none)",
				"landing_pages": "brand.example/", "countries": "(unknown)", "devices": "(unknown)"}},
		{"garbage everywhere", "not a url", "::::", "Deutschland", "\x00\x01",
			sources.Dims{"referrers": "(direct)", "utm_sources": "(none)", "utm_mediums": "(none)", "utm_campaigns": "(none)",
				"landing_pages": "(unknown)", "countries": "(unknown)", "devices": "(unknown)"}},
		{"an empty tag is none; an android app referrer has a host", "https://brand.example/a/b?utm_source=&utm_medium=%20",
			"android-app://com.google.android.gm/", "us", "tablet",
			sources.Dims{"referrers": "com.google.android.gm", "utm_sources": "(none)", "utm_mediums": "(none)", "utm_campaigns": "(none)",
				"landing_pages": "brand.example/a/b", "countries": "US", "devices": "tablet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sources.FromClick(tc.page, tc.ref, tc.country, tc.device)
			for _, dim := range sources.Dimensions {
				if got[dim] != tc.want[dim] {
					t.Errorf("%s = %q, want %q", dim, got[dim], tc.want[dim])
				}
			}
		})
	}
	t.Run("values are bounded, printable and whole runes", func(t *testing.T) {
		long := strings.Repeat("é", 300)
		got := sources.FromClick("https://brand.example/"+long+"?utm_campaign="+long+"%00x", "https://"+strings.Repeat("a", 300)+".example/", "", long)
		for _, dim := range sources.Dimensions {
			v := got[dim]
			if len(v) > 200 || strings.ContainsRune(v, 0) || strings.ContainsRune(v, '\uFFFD') {
				t.Errorf("%s = %q (%d bytes)", dim, v, len(v))
			}
		}
		if len(got["utm_campaigns"]) > 100 || len(got["devices"]) > 100 || len(got["referrers"]) > 100 {
			t.Errorf("%+v", got)
		}
	})
}

func FuzzFromClick(f *testing.F) {
	f.Add("https://brand.example/?utm_source=x", "https://ref.example/", "us", "desktop")
	f.Add("%zz", "http://[::1", "\xff", "\x00")
	f.Fuzz(func(t *testing.T, page, ref, country, device string) {
		got := sources.FromClick(page, ref, country, device)
		for _, dim := range sources.Dimensions {
			v := got[dim]
			if v == "" || len(v) > 200 || strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
				t.Fatalf("%s = %q", dim, v)
			}
		}
	})
}

func TestRank(t *testing.T) {
	rows := []sources.Row{
		{Name: "c", Clicks: 50},
		{Name: "a", Clicks: 1, Conversions: 1, Revenue: 10},
		{Name: "b", Clicks: 9, Conversions: 3, Revenue: 10},
		{Name: "d", Clicks: 50},
		{Name: "e", Clicks: 2, Conversions: 5},
	}
	got := sources.Rank(rows, 4)
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "b,a,e,c" {
		t.Fatalf("ranked %v, want revenue, then conversions, then clicks, then name", names)
	}
}
