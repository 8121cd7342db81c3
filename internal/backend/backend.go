// Package backend tells which store backend a store setting (the config's
// store key, the store's DSN) names, so that config, store and their callers
// agree. It imports nothing of pacer, so that config and store, which import
// no pacer package either, can both use it.
package backend

import "strings"

// IsPostgres reports whether a store setting names a PostgreSQL server
// rather than a SQLite file: it starts with postgres:// or postgresql://,
// the scheme in any case (as PostgreSQL reads it).
func IsPostgres(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}
