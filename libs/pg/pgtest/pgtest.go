// Package pgtest gives each test its own Postgres database, so tests run in
// parallel and on machines where earlier runs left data behind.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

	conn, err := connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: Postgres unreachable at %s (set TEST_DATABASE_URL to a server where the user may CREATE DATABASE): %v", redact(admin), err)
	}
	defer conn.Close(context.Background())

	name := dbName(t.Name())
	// template0 accepts no connections, so concurrent CREATE DATABASE calls
	// never fail with "source database is being accessed by other users".
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := connect(ctx, admin)
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})

	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse TEST_DATABASE_URL: invalid format")
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > 5*time.Second {
		cfg.ConnectTimeout = 5 * time.Second
	}
	return pgx.ConnectConfig(ctx, cfg)
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
	var suffix [6]byte
	_, _ = rand.Read(suffix[:]) // crypto/rand.Read never fails on supported platforms
	return "t_" + base + "_" + hex.EncodeToString(suffix[:])
}

// withDatabase returns dsn pointing at database name; it accepts both URL
// and keyword/value connection strings.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse TEST_DATABASE_URL: invalid URL")
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	// keyword/value: a later dbname wins.
	return dsn + " dbname=" + name, nil
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
