// Package migrations embeds the commissions schema's SQL migrations.
package migrations

import "embed"

// FS holds the goose migrations, applied at start and by `commissions migrate`.
//
//go:embed *.sql
var FS embed.FS
