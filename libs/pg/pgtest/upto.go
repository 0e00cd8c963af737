package pgtest

import (
	"io/fs"
	"testing"
	"testing/fstest"
)

// MigrationsUpTo is the migrations of fsys numbered at most last (the
// first five characters of each *.sql name, "00009"): a database as an
// older release left it, for a test of what a later migration does to its
// rows.
func MigrationsUpTo(t testing.TB, fsys fs.FS, last string) fs.FS {
	t.Helper()
	out := fstest.MapFS{}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		t.Fatalf("list migrations: %v", err)
	}
	for _, n := range names {
		if len(n) >= 5 && n[:5] <= last {
			b, err := fs.ReadFile(fsys, n)
			if err != nil {
				t.Fatalf("read migration %s: %v", n, err)
			}
			out[n] = &fstest.MapFile{Data: b}
		}
	}
	return out
}
