// Package migrations embeds the analytics schema's SQL migrations.
package migrations

import "embed"

// FS holds the goose migrations, applied at start and by `analytics migrate`.
//
//go:embed *.sql
var FS embed.FS
