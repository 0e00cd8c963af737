package apikey

import (
	"sync"
	"time"
)

// Use is the latest successful authentication of one key seen since the
// last Drain.
type Use struct {
	KeyID     int64
	ProgramID int64
	At        time.Time
}

// Uses collects the keys that authenticated, in memory, for a service to
// report in batches (a key's last use is shown in the brand console). It
// holds at most one entry per key used since the last Drain, so its memory
// is bounded by the keys that exist, never by the request rate; an
// unknown or refused key is never recorded. Safe for concurrent use.
type Uses struct {
	mu      sync.Mutex
	pending map[int64]Use
}

// NewUses returns an empty collector.
func NewUses() *Uses { return &Uses{pending: map[int64]Use{}} }

// Record notes that k authenticated at at, keeping the latest time per key.
func (u *Uses) Record(k Key, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if cur, ok := u.pending[k.ID]; ok && !at.After(cur.At) {
		return
	}
	u.pending[k.ID] = Use{KeyID: k.ID, ProgramID: k.ProgramID, At: at}
}

// Drain returns the uses recorded since the last Drain and forgets them.
func (u *Uses) Drain() []Use {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Use, 0, len(u.pending))
	for _, use := range u.pending {
		out = append(out, use)
	}
	clear(u.pending)
	return out
}

// Restore puts back uses whose report failed, so the next report carries
// them (a newer use recorded meanwhile wins).
func (u *Uses) Restore(uses []Use) {
	for _, use := range uses {
		u.Record(Key{ID: use.KeyID, ProgramID: use.ProgramID}, use.At)
	}
}
