// Package pgtest gives each test its own Postgres database, so tests run in
// parallel and on machines where earlier runs left data behind.
package pgtest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/pg/pgadmin"
)

// DefaultURL is used when TEST_DATABASE_URL is unset: the local trust-auth
// server of the development machine.
const DefaultURL = "postgres://postgres@localhost:5432/postgres?sslmode=disable"

// AdminURL returns TEST_DATABASE_URL, or DefaultURL when it is unset. The
// database it names is only used to create and drop test databases.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// NewDatabase creates a fresh, uniquely named database on the AdminURL
// server and returns its DSN. The database is dropped WITH (FORCE) in
// t.Cleanup, after the test's own cleanups (which close its pools) have run.
// When the server is unreachable the test fails with one message saying so.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := AdminURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := dbName(t.Name())
	dsn, _, err := pgadmin.CreateDatabase(ctx, admin, name)
	if err != nil {
		t.Fatalf("pgtest: %s (TEST_DATABASE_URL %s must name a server where the user may CREATE DATABASE)", err, redact(admin))
	}
	t.Cleanup(func() {
		if err := pgadmin.DropDatabase(context.Background(), admin, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

// dbName builds "t_<test name>_<random>", lower-cased and cut to fit the 63
// byte identifier limit. The test name helps find a leaked database; the
// random suffix keeps parallel and repeated runs apart.
func dbName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	base := b.String()
	if len(base) > 40 {
		base = base[:40]
	}
	return pgadmin.ScratchName("t_" + base)
}

// redact hides the password of a DSN for error messages.
func redact(dsn string) string {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return "(keyword/value TEST_DATABASE_URL)"
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparseable TEST_DATABASE_URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	return u.String()
}
