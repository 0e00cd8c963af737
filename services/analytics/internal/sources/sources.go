// Package sources decides where a program's traffic comes from: the
// source dimensions of a click (referrer domain, UTM source, medium and
// campaign, landing page, country, device) and the ranking of a period's
// sources. A customer's leads, conversions and revenue are credited to
// the dimensions of the click that created the customer, so one customer's
// figures add up under each dimension. Pure functions: no I/O.
package sources

import (
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"
)

// Dimension names, as the sources routes answer them (one list each).
const (
	DimReferrer    = "referrers"
	DimUTMSource   = "utm_sources"
	DimUTMMedium   = "utm_mediums"
	DimUTMCampaign = "utm_campaigns"
	DimLandingPage = "landing_pages"
	DimCountry     = "countries"
	DimDevice      = "devices"
)

// Dimensions in the order the routes list them.
var Dimensions = []string{DimReferrer, DimUTMSource, DimUTMMedium, DimUTMCampaign, DimLandingPage, DimCountry, DimDevice}

// Values standing for "nothing there".
const (
	Direct  = "(direct)"  // no referrer
	None    = "(none)"    // no such UTM parameter
	Unknown = "(unknown)" // no landing page, country or device
)

// Bounds of a stored value: sources are grouped by value, so an attacker's
// megabyte-long utm_campaign must not become a megabyte-long key.
const (
	maxValue       = 100
	maxLandingPage = 200
)

// Dims are a click's source dimensions, each a value of its dimension.
type Dims map[string]string

// FromClick reads the dimensions of a click from what tracking recorded:
// the landing page URL (its UTM parameters and its host and path), the
// referrer URL, the geo country and the device type.
func FromClick(pageURL, referrerURL, country, device string) Dims {
	d := Dims{
		DimReferrer:    referrerDomain(referrerURL),
		DimUTMSource:   None,
		DimUTMMedium:   None,
		DimUTMCampaign: None,
		DimLandingPage: Unknown,
		DimCountry:     Unknown,
		DimDevice:      Unknown,
	}
	if u, err := url.Parse(strings.TrimSpace(pageURL)); err == nil && u.Host != "" {
		q := u.Query()
		for dim, param := range map[string]string{DimUTMSource: "utm_source", DimUTMMedium: "utm_medium", DimUTMCampaign: "utm_campaign"} {
			if v := clean(strings.ToLower(q.Get(param)), maxValue); v != "" {
				d[dim] = v
			}
		}
		path := u.EscapedPath()
		if path == "" {
			path = "/"
		}
		d[DimLandingPage] = clean(strings.ToLower(strings.TrimPrefix(u.Hostname(), "www."))+path, maxLandingPage)
	}
	if c := strings.ToUpper(strings.TrimSpace(country)); len(c) == 2 && c[0] >= 'A' && c[0] <= 'Z' && c[1] >= 'A' && c[1] <= 'Z' {
		d[DimCountry] = c
	}
	if v := clean(strings.ToLower(device), maxValue); v != "" {
		d[DimDevice] = v
	}
	return d
}

// referrerDomain is the referrer's host without "www.", or Direct.
func referrerDomain(ref string) string {
	u, err := url.Parse(strings.TrimSpace(ref))
	if err != nil || u.Hostname() == "" {
		return Direct
	}
	if h := clean(strings.ToLower(strings.TrimPrefix(u.Hostname(), "www.")), maxValue); h != "" {
		return h
	}
	return Direct
}

// clean trims s, drops what is not printable (control characters, NUL,
// invalid UTF-8) and cuts it to at most max bytes on a rune boundary.
func clean(s string, max int) string {
	s = strings.TrimSpace(s)
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > max {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Row is one source's figures over a period; Revenue in dollars.
type Row struct {
	Name        string  `json:"name"`
	Clicks      int64   `json:"clicks"`
	Leads       int64   `json:"leads"`
	Conversions int64   `json:"conversions"`
	Revenue     float64 `json:"revenue"`
}

// Rank orders rows by revenue, then conversions, then clicks (all
// descending), then name, and keeps the first limit.
func Rank(rows []Row, limit int) []Row {
	return RankBy(rows, limit, func(r Row) Ranked { return Ranked{r.Revenue, r.Conversions, r.Clicks, r.Name} })
}

// Ranked is what ranks a row: revenue, then conversions, then clicks (all
// descending), then Tie ascending.
type Ranked struct {
	Revenue             float64
	Conversions, Clicks int64
	Tie                 string
}

// RankBy orders any rows by their Ranked (the sources' and the partners'
// one order) and keeps the first limit (0: all).
func RankBy[T any](rows []T, limit int, rank func(T) Ranked) []T {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rank(rows[i]), rank(rows[j])
		switch {
		case a.Revenue != b.Revenue:
			return a.Revenue > b.Revenue
		case a.Conversions != b.Conversions:
			return a.Conversions > b.Conversions
		case a.Clicks != b.Clicks:
			return a.Clicks > b.Clicks
		}
		return a.Tie < b.Tie
	})
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows
}
