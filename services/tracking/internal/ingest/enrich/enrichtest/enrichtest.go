// Package enrichtest builds small MaxMind-format (.mmdb) geo databases for
// tests, with the GeoIP2-City record layout the enrich package reads, so unit
// and integration tests can point GEOIP_DB at a file they control.
package enrichtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// Record places one network. Empty fields are left out of the record, the
// way the real databases leave out what they do not know.
type Record struct {
	Network    string // CIDR, IPv4 or IPv6: "81.2.69.0/24", "2001:218::/32"
	Country    string // ISO 3166-1 alpha-2 -> country.iso_code
	Region     string // ISO 3166-2 code without the country -> subdivisions[0].iso_code
	RegionName string // -> subdivisions[0].names.en
	City       string // -> city.names.en
}

// SampleRecords returns a few networks with known locations, IPv4 and IPv6.
// 81.2.69.160 and 216.160.83.56 are the addresses MaxMind's own test
// databases use. Region "" with RegionName set exercises the name fallback.
func SampleRecords() []Record {
	return []Record{
		{Network: "81.2.69.0/24", Country: "GB", Region: "ENG", RegionName: "England", City: "London"},
		{Network: "216.160.83.0/24", Country: "US", Region: "WA", RegionName: "Washington", City: "Milton"},
		{Network: "89.160.20.0/24", Country: "SE", RegionName: "Östergötland County", City: "Linköping"},
		{Network: "2001:218::/32", Country: "JP", Region: "13", RegionName: "Tokyo", City: "Tokyo"},
		{Network: "2a02:cf40::/29", Country: "NO"},
	}
}

// WriteTestDB writes a GeoLite2-City-typed database holding records to path
// (use a file under t.TempDir()). Reserved networks (loopback, private,
// documentation ranges) are allowed, so an integration test can give
// 127.0.0.1 a location.
func WriteTestDB(t testing.TB, path string, records []Record) {
	t.Helper()
	if err := WriteDB(path, "GeoLite2-City", records); err != nil {
		t.Fatalf("write test geoip database: %v", err)
	}
}

// WriteDB writes a database of the given metadata type holding records to
// path, creating its directory if needed.
func WriteDB(path, databaseType string, records []Record) error {
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType:            databaseType,
		Description:             map[string]string{"en": "svc enrich test database"},
		Languages:               []string{"en"},
		IPVersion:               6,
		RecordSize:              28,
		IncludeReservedNetworks: true,
	})
	if err != nil {
		return fmt.Errorf("new mmdb tree: %w", err)
	}
	for _, r := range records {
		_, network, err := net.ParseCIDR(r.Network)
		if err != nil {
			return fmt.Errorf("record network %q: %w", r.Network, err)
		}
		if err := tree.Insert(network, cityRecord(r)); err != nil {
			return fmt.Errorf("insert %s: %w", r.Network, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create directory of %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// cityRecord lays a Record out like a GeoIP2-City record, including fields
// the reader must skip (geoname ids, other languages, continent, location),
// so lookups against it cost what they cost against the real database.
func cityRecord(r Record) mmdbtype.Map {
	m := mmdbtype.Map{
		"continent": mmdbtype.Map{
			"code":       mmdbtype.String("XX"),
			"geoname_id": mmdbtype.Uint32(6255148),
			"names":      names("Test continent"),
		},
		"location": mmdbtype.Map{
			"accuracy_radius": mmdbtype.Uint16(100),
			"latitude":        mmdbtype.Float64(51.5142),
			"longitude":       mmdbtype.Float64(-0.0931),
			"time_zone":       mmdbtype.String("Europe/London"),
		},
	}
	if r.Country != "" {
		country := mmdbtype.Map{
			"iso_code":   mmdbtype.String(r.Country),
			"geoname_id": mmdbtype.Uint32(2635167),
			"names":      names(r.Country),
		}
		m["country"] = country
		m["registered_country"] = country
	}
	if r.Region != "" || r.RegionName != "" {
		sub := mmdbtype.Map{"geoname_id": mmdbtype.Uint32(6269131)}
		if r.Region != "" {
			sub["iso_code"] = mmdbtype.String(r.Region)
		}
		if r.RegionName != "" {
			sub["names"] = names(r.RegionName)
		}
		m["subdivisions"] = mmdbtype.Slice{sub}
	}
	if r.City != "" {
		m["city"] = mmdbtype.Map{
			"geoname_id": mmdbtype.Uint32(2643743),
			"names":      names(r.City),
		}
	}
	return m
}

// names mimics the localized names map: the reader wants "en" only.
func names(en string) mmdbtype.Map {
	return mmdbtype.Map{
		"de":    mmdbtype.String(en),
		"en":    mmdbtype.String(en),
		"es":    mmdbtype.String(en),
		"fr":    mmdbtype.String(en),
		"ja":    mmdbtype.String(en),
		"pt-BR": mmdbtype.String(en),
		"ru":    mmdbtype.String(en),
		"zh-CN": mmdbtype.String(en),
	}
}
