// Package migrations embeds the tracking schema's SQL migrations.
package migrations

import "embed"

// FS holds the goose migrations, applied at start and by `tracking migrate`.
//
//go:embed *.sql
var FS embed.FS
