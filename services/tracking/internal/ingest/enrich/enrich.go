// Package enrich derives the server-side attributes stored on every click
// event: geo (country, region, city) from a MaxMind-format database and
// device type, OS and browser from the User-Agent.
//
// An Enricher is safe for concurrent use. Enrich never fails: whatever cannot
// be derived is left empty, because a click must be recorded even when its
// visitor cannot be located or its browser is unknown.
package enrich

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/oschwald/maxminddb-golang/v2"
)

// Device types stored on click events. An unknown device is "".
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceBot     = "bot"
)

// DefaultUACacheSize is the number of distinct User-Agents whose parse result
// is kept when Config.UACacheSize is 0. A few thousand strings cover nearly
// all real browser traffic; the bound is what keeps rotating bot UAs from
// growing memory (at most about 1 KiB per entry, see maxUALen).
const DefaultUACacheSize = 4096

// maxUALen bounds the User-Agent bytes parsed and cached. Real browser UAs are
// a few hundred bytes; anything past this is either junk or an attempt to
// make each click expensive.
const maxUALen = 1024

// maxBrowserLen drops browser names that are not plausible family names: for
// an unrecognised UA the parser may fall back to the whole string.
const maxBrowserLen = 64

// Config configures New.
type Config struct {
	// GeoIPPath is the path of a MaxMind DB (.mmdb) file with the GeoIP2 /
	// GeoLite2 City or Country layout (env GEOIP_DB). Empty disables geo:
	// the geo fields of Info stay empty.
	GeoIPPath string
	// UACacheSize is the number of distinct User-Agents whose parse result
	// is cached (LRU). 0 means DefaultUACacheSize; a negative value disables
	// the cache.
	UACacheSize int
}

// Info is what a click event stores about its visitor. Every field may be
// empty when it cannot be derived.
type Info struct {
	Country    string // ISO 3166-1 alpha-2, e.g. "US"
	Region     string // first subdivision's ISO 3166-2 code without the country, e.g. "CA"; its English name when the database has no code
	City       string // English city name, e.g. "Mountain View"
	DeviceType string // DeviceDesktop, DeviceMobile, DeviceTablet, DeviceBot or ""
	OS         string // family: "Windows", "macOS", "iOS", "Android", "Linux", "ChromeOS", ...
	Browser    string // family: "Chrome", "Safari", "Firefox", "Edge", "Opera", "Samsung Browser", bot names, ...
}

// GeoDBInfo describes the geo database an Enricher opened, for the startup
// log line.
type GeoDBInfo struct {
	Path      string
	Type      string // metadata database_type, e.g. "GeoLite2-City"
	BuildTime time.Time
	IPVersion uint
}

// Enricher derives Info. Create it with New and Close it on shutdown.
type Enricher struct {
	// geo is nil when no database is configured and after Close. Atomic
	// so that Close never races a lookup still in flight.
	geo     atomic.Pointer[maxminddb.Reader]
	geoInfo GeoDBInfo
	uaCache *lru.Cache[string, uaInfo] // nil when caching is disabled
}

// New opens the geo database named by cfg.GeoIPPath, if any, and checks it,
// so that a missing, truncated or foreign file (a tar.gz, an HTML error page,
// an ASN database, another vendor's layout) stops the service at startup
// instead of silently producing empty geo on every click. The check is the
// file's metadata, its database type and a decode of its first
// geoSampleSize records with the layout Enrich reads; it takes milliseconds.
// VerifyGeoDB is the exhaustive (slow) check.
func New(cfg Config) (*Enricher, error) {
	e := &Enricher{}
	if cfg.GeoIPPath != "" {
		r, info, err := openGeo(cfg.GeoIPPath)
		if err != nil {
			return nil, err
		}
		e.geo.Store(r)
		e.geoInfo = info
	}
	size := cfg.UACacheSize
	if size == 0 {
		size = DefaultUACacheSize
	}
	if size > 0 {
		c, err := lru.New[string, uaInfo](size)
		if err != nil {
			if r := e.geo.Load(); r != nil {
				_ = r.Close() // nothing else can hold it yet
			}
			return nil, fmt.Errorf("create user-agent cache: %w", err)
		}
		e.uaCache = c
	}
	return e, nil
}

// VerifyGeoDB checks every search-tree node and every record of the database
// at path, on top of the checks New makes. It is slow (about 40 µs per
// distinct record, so tens of seconds for a full City database), which is
// why New does not run it: use it where a new database file is accepted,
// such as the job that downloads updates, before swapping the file in.
func VerifyGeoDB(path string) error {
	r, _, err := openGeo(path)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	if err := r.Verify(); err != nil {
		return fmt.Errorf("verify geoip database %q: %w", path, err)
	}
	return nil
}

// geoSampleSize is how many records New decodes at startup.
const geoSampleSize = 1000

func openGeo(path string) (*maxminddb.Reader, GeoDBInfo, error) {
	r, err := maxminddb.Open(path)
	if err != nil {
		return nil, GeoDBInfo{}, fmt.Errorf("open geoip database %q: %w", path, err)
	}
	md := r.Metadata
	if !isLocationDB(md.DatabaseType) {
		_ = r.Close()
		return nil, GeoDBInfo{}, fmt.Errorf("geoip database %q is of type %q: want a City or Country database (GeoIP2/GeoLite2 City, Country or Enterprise layout)", path, md.DatabaseType)
	}
	if err := checkSample(r, geoSampleSize); err != nil {
		_ = r.Close()
		return nil, GeoDBInfo{}, fmt.Errorf("check geoip database %q: %w", path, err)
	}
	return r, GeoDBInfo{Path: path, Type: md.DatabaseType, BuildTime: md.BuildTime(), IPVersion: md.IPVersion}, nil
}

// checkSample walks the search tree from its start and decodes the first n
// records the way lookups will. Open reads only the metadata at the end of
// the file; this catches a damaged tree near the root and a record layout
// Enrich cannot read, which would otherwise fail every lookup quietly.
func checkSample(r *maxminddb.Reader, n int) error {
	seen := 0
	for res := range r.Networks() {
		var rec cityRecord
		if err := res.Decode(&rec); err != nil {
			return fmt.Errorf("record %d (%s) does not decode as a City/Country record: %w", seen, res.Prefix(), err)
		}
		seen++
		if seen == n {
			break
		}
	}
	if seen == 0 {
		return errors.New("the database holds no networks")
	}
	return nil
}

// isLocationDB reports whether a database type carries the country/city
// layout. MaxMind also ships ASN, ISP, Domain and anonymity databases in the
// same file format; opening one of those by mistake would otherwise go
// unnoticed.
func isLocationDB(dbType string) bool {
	t := strings.ToLower(dbType)
	return strings.Contains(t, "city") || strings.Contains(t, "country") || strings.Contains(t, "enterprise")
}

// GeoDB describes the opened geo database; ok is false when none is configured.
func (e *Enricher) GeoDB() (info GeoDBInfo, ok bool) {
	if e == nil || e.geo.Load() == nil {
		return GeoDBInfo{}, false
	}
	return e.geoInfo, true
}

// Close detaches the geo database: later lookups find no location. It does
// not unmap the file itself, because a request still in flight (one that
// outlived the shutdown grace) may be reading it; the reader's own cleanup
// unmaps it once no lookup holds it. Calling Close twice is harmless.
func (e *Enricher) Close() error {
	if e == nil {
		return nil
	}
	e.geo.Store(nil)
	return nil
}

// Enrich derives the visitor's geo from ip and device, OS and browser from
// userAgent. An invalid ip (the zero netip.Addr) yields no geo; an IPv4-mapped
// IPv6 address is looked up as IPv4.
func (e *Enricher) Enrich(ip netip.Addr, userAgent string) Info {
	if e == nil {
		return Info{}
	}
	var info Info
	info.Country, info.Region, info.City = e.lookupGeo(ip)
	ua := e.parseUA(userAgent)
	info.DeviceType, info.OS, info.Browser = ua.device, ua.os, ua.browser
	return info
}

// cityRecord holds the only fields read from a record; the reader skips the
// rest (other languages, geoname ids, location, postal, traits), which keeps
// a lookup to a handful of small allocations.
type cityRecord struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	Subdivisions []struct {
		ISOCode string `maxminddb:"iso_code"`
		Names   struct {
			En string `maxminddb:"en"`
		} `maxminddb:"names"`
	} `maxminddb:"subdivisions"`
	City struct {
		Names struct {
			En string `maxminddb:"en"`
		} `maxminddb:"names"`
	} `maxminddb:"city"`
}

func (e *Enricher) lookupGeo(ip netip.Addr) (country, region, city string) {
	geo := e.geo.Load()
	if geo == nil || !ip.IsValid() {
		return "", "", ""
	}
	// Proxies and dual-stack listeners report IPv4 clients as ::ffff:a.b.c.d;
	// the database stores them under its IPv4 subtree.
	ip = ip.Unmap()
	var rec cityRecord
	// Not found, an IPv6 address in an IPv4-only database and a record that
	// does not decode all mean "location unknown": a click is never refused
	// for it. The startup check makes the last one unlikely (a wrong layout
	// fails there) but cannot rule out damage deep in the file.
	if err := geo.Lookup(ip).Decode(&rec); err != nil {
		return "", "", ""
	}
	if len(rec.Subdivisions) > 0 {
		region = rec.Subdivisions[0].ISOCode
		if region == "" {
			region = rec.Subdivisions[0].Names.En
		}
	}
	return rec.Country.ISOCode, region, rec.City.Names.En
}
