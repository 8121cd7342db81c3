// Package store persists source state, poll history, the CLI's commands,
// the outbox of notifications and a cluster's shards, in SQLite or
// PostgreSQL.
//
// Only the store imports gorm and writes SQL. It knows nothing about
// scheduling: it speaks the domain's types (package domain), which carry
// no storage tags; its own rows (stateModel, commandModel, eventModel ...
// in internal/sqlcore) hold the columns, and are converted at its
// boundary.
//
// Backend is the store in those terms. Each dialect implements it on the
// shared core (internal/sqlcore: the commands, the outbox, the reads and
// the batched commit, whose SQL is the same in both): sqlite.Store (one
// connection, no cluster) and postgres.Store (a pool, and the cluster).
// What differs in their SQL is a method of each one's dialect type rather
// than a branch in the core. Open picks the backend from the DSN and
// returns the Store handle that callers hold. This package also holds
// what is not a backend's: the daemon lock (lock.go, postgres_lock.go)
// and the guard of a SQLite file (identity.go).
package store
