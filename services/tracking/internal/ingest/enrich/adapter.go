package enrich

import (
	"net/netip"

	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// Ingest is e as the ingest domain's Enricher (the port this package is the
// adapter of).
func (e *Enricher) Ingest() ingest.Enricher { return ingestAdapter{e} }

type ingestAdapter struct{ e *Enricher }

func (a ingestAdapter) Enrich(ip netip.Addr, ua string) ingest.Enrichment {
	i := a.e.Enrich(ip, ua)
	return ingest.Enrichment{Country: i.Country, Region: i.Region, City: i.City, DeviceType: i.DeviceType, OS: i.OS, Browser: i.Browser}
}
