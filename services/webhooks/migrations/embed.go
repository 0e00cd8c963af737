// Package migrations embeds the webhooks schema's SQL migrations.
package migrations

import "embed"

// FS holds the goose migrations, applied at start and by `webhooks migrate`.
//
//go:embed *.sql
var FS embed.FS
