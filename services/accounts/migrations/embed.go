// Package migrations embeds the accounts schema's SQL migrations.
package migrations

import "embed"

// FS holds the goose migrations, applied at start and by `accounts migrate`.
//
//go:embed *.sql
var FS embed.FS
