package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// DefaultVersionTable is the goose version table created in the migrated
// schema unless WithVersionTable says otherwise.
const DefaultVersionTable = "goose_db_version"

// MigrateOption tunes Migrate and MigrationStatus.
type MigrateOption func(*migrateConfig)

type migrateConfig struct {
	table       string
	lockTimeout time.Duration
}

// WithVersionTable names the version table (created in the migrated schema).
// Libraries that ship their own migrations into a service's schema (such as
// the outbox) use a table of their own so their versions never mix with the
// service's.
func WithVersionTable(name string) MigrateOption {
	return func(c *migrateConfig) { c.table = name }
}

// WithLockTimeout bounds how long Migrate waits for another process holding
// the migration lock (default 5 minutes).
func WithLockTimeout(d time.Duration) MigrateOption {
	return func(c *migrateConfig) { c.lockTimeout = d }
}

// Migrate applies every pending Up migration found at the root of fsys (goose
// SQL files, e.g. an embed.FS of "*.sql") to schema, which is created if
// missing. During the run search_path is the schema alone, so migration SQL
// uses unqualified names. The version table is "<schema>.goose_db_version".
//
// Concurrent callers (several pods starting at once) are serialized by a
// Postgres session advisory lock keyed on schema and version table: one
// applies, the others wait and then find nothing pending. Different schemas,
// or different version tables in one schema, do not block each other.
func Migrate(ctx context.Context, dsn, schema string, fsys fs.FS, logger *slog.Logger, opts ...MigrateOption) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p, db, cfg, err := newProvider(dsn, schema, fsys, opts)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := createSchema(ctx, db, schema); err != nil {
		return err
	}
	results, err := p.Up(ctx)
	for _, r := range results {
		if r.Error != nil {
			continue
		}
		logger.InfoContext(ctx, "migration applied",
			"schema", schema, "table", cfg.table, "version", r.Source.Version,
			"source", r.Source.Path, "duration_ms", r.Duration.Milliseconds())
	}
	if err != nil {
		return fmt.Errorf("migrate schema %s: %w", schema, err)
	}
	return nil
}

// MigrationState is one migration of MigrationStatus.
type MigrationState struct {
	Version   int64
	Source    string
	Applied   bool
	AppliedAt time.Time // zero when pending
}

// MigrationStatus lists the migrations found in fsys and whether each is
// applied in schema. It takes no lock and, when the schema does not exist
// yet, reports everything pending without creating anything.
func MigrationStatus(ctx context.Context, dsn, schema string, fsys fs.FS, opts ...MigrateOption) ([]MigrationState, error) {
	p, db, _, err := newProvider(dsn, schema, fsys, opts)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return nil, fmt.Errorf("look up schema %s: %w", schema, err)
	}
	if !exists {
		var out []MigrationState
		for _, s := range p.ListSources() {
			out = append(out, MigrationState{Version: s.Version, Source: s.Path})
		}
		return out, nil
	}
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status of schema %s: %w", schema, err)
	}
	out := make([]MigrationState, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationState{
			Version:   s.Source.Version,
			Source:    s.Source.Path,
			Applied:   s.State == goose.StateApplied,
			AppliedAt: s.AppliedAt,
		})
	}
	return out, nil
}

func newProvider(dsn, schema string, fsys fs.FS, opts []MigrateOption) (*goose.Provider, *sql.DB, migrateConfig, error) {
	cfg := migrateConfig{table: DefaultVersionTable, lockTimeout: 5 * time.Minute}
	for _, o := range opts {
		o(&cfg)
	}
	if err := ValidSchema(schema); err != nil {
		return nil, nil, cfg, err
	}
	if err := ValidSchema(cfg.table); err != nil {
		return nil, nil, cfg, fmt.Errorf("version table: %w", err)
	}
	connCfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, cfg, errors.New("parse database url: invalid format")
	}
	connCfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*connCfg)

	// goose's session locker polls pg_try_advisory_lock; its period has a
	// one-second floor, so waiting costs at most a second after release.
	attempts := uint64(cfg.lockTimeout / time.Second)
	if attempts < 1 {
		attempts = 1
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(lockID(schema, cfg.table)),
		lock.WithLockTimeout(1, attempts),
	)
	if err != nil {
		db.Close()
		return nil, nil, cfg, fmt.Errorf("create migration locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithTableName(schema+"."+cfg.table),
		goose.WithSessionLocker(locker),
		// Only the migrations in fsys: nothing registered process-wide.
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		db.Close()
		return nil, nil, cfg, fmt.Errorf("create migration provider for schema %s: %w", schema, err)
	}
	return p, db, cfg, nil
}

// createSchema tolerates a concurrent creator: CREATE SCHEMA IF NOT EXISTS
// is not atomic against another session doing the same and can fail with a
// unique violation on pg_namespace, which means the schema now exists.
func createSchema(ctx context.Context, db *sql.DB, schema string) error {
	_, err := db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
	if err != nil && !IsUniqueViolation(err) && Code(err) != "42P06" {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	return nil
}

// lockID derives the advisory-lock key from schema and version table, so
// unrelated migrations in one database run in parallel.
func lockID(schema, table string) int64 {
	h := fnv.New64a()
	h.Write([]byte("goose:" + schema + "." + table))
	return int64(h.Sum64())
}
