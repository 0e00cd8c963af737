package platform

import "github.com/svc-dev/svc/libs/catalogsync"

// extraMigrations is spec.ExtraMigrations, preceded by catalogsync's for a
// Spec that still sets the deprecated CatalogReplica. This file, and the
// platform's dependency on catalogsync, go once no Spec sets it.
func (s Spec) extraMigrations() []MigrateFunc {
	if !s.CatalogReplica {
		return s.ExtraMigrations
	}
	return append([]MigrateFunc{catalogsync.Migrate}, s.ExtraMigrations...)
}
