// Package migrations embeds the catalog progress tables every consuming
// service keeps in its own schema.
package migrations

import "embed"

//go:embed *.sql
var FS embed.FS
