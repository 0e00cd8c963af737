package pgstore

import (
	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// catalogCache memoises the replica reads of the hot paths (links,
// programs, browser origins, API keys): catalogsync.Cache, dropped whole
// by the replica consumer's NOTIFY in the transaction that changes the
// replica (a revoked key or a disabled link is seen as soon as it commits),
// bypassed while its listener is down, least recently used entries evicted
// at its size.
type catalogCache = catalogsync.Cache[cacheKey, cacheEntry]

type cacheKey struct {
	kind string // "link", "program", "origin", "key"
	code string
	id   int64
}

type cacheEntry struct {
	found bool
	link  ingest.Link
	prog  ingest.Program
	key   apikey.Key
}
