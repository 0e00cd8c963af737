// Package outbox implements the transactional outbox: Enqueue writes an
// event in the caller's transaction, and a Relay publishes committed events
// to Kafka in order, at least once. Package inbox holds the consuming side.
package outbox

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/svc-dev/svc/libs/pg"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// VersionTable is this library's goose version table inside the service's
// schema, separate from the service's own goose_db_version.
const VersionTable = "bus_db_version"

// Migrate creates (or upgrades) the outbox, inbox and dead_letters tables in
// schema. Run it alongside the service's own migrations, before the service
// starts its relay and consumers.
func Migrate(ctx context.Context, dsn, schema string, logger *slog.Logger) error {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("outbox migrations: %w", err)
	}
	if err := pg.Migrate(ctx, dsn, schema, sub, logger, pg.WithVersionTable(VersionTable)); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}
