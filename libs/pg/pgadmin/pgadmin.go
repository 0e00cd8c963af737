// Package pgadmin makes and drops throwaway databases: tests (pgtest) and
// the benchmark tools make one per run on a server where the user may
// CREATE DATABASE, so a run never meets an earlier one's data and runs go
// side by side. It needs only pgx, so a test module importing pgtest does
// not pull in the services' pool, migrations and tracing.
package pgadmin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// CreateDatabase creates database name on the server adminDSN names and
// returns its DSN and a function that drops it (errors ignored: use
// DropDatabase to see them). It is created from template0, which accepts
// no connections, so concurrent creations never fail with "source database
// is being accessed by other users".
func CreateDatabase(ctx context.Context, adminDSN, name string) (dsn string, drop func(), err error) {
	dsn, err = WithDatabase(adminDSN, name)
	if err != nil {
		return "", nil, err
	}
	conn, err := connectAdmin(ctx, adminDSN)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	return dsn, func() { _ = DropDatabase(context.Background(), adminDSN, name) }, nil
}

// DropDatabase drops database name on adminDSN's server WITH (FORCE), so
// a pool a crash left open cannot keep it alive; it gives up after 30
// seconds.
func DropDatabase(ctx context.Context, adminDSN, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := connectAdmin(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// ScratchName is prefix, an underscore and 12 random hex digits: a
// database name no other run picks.
func ScratchName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + "_" + hex.EncodeToString(b[:])
}

// WithDatabase returns dsn pointing at database name; it takes both URL
// and keyword/value connection strings.
func WithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			// The parse error can echo the URL, password included.
			return "", errors.New("parse database url: invalid URL")
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	// keyword/value: a later dbname wins.
	return dsn + " dbname=" + name, nil
}

// connectAdmin connects to adminDSN, giving up after 5 seconds; the error
// names the server, never the password.
func connectAdmin(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("parse database url: invalid format")
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > 5*time.Second {
		cfg.ConnectTimeout = 5 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres unreachable at %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	return conn, nil
}
