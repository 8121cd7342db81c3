// Package store persists source state, poll history, the CLI's commands,
// the outbox of notifications and a cluster's shards, in SQLite or
// PostgreSQL.
//
// Only this package imports gorm and writes SQL. It knows nothing about
// scheduling: it speaks the domain's types (package domain), which carry
// no storage tags; its own rows (stateModel, commandModel, eventModel ...)
// hold the columns, and are converted at its boundary.
//
// Backend is the store in those terms. Each dialect implements it on a
// shared core (core.go: the commands, the outbox, the reads and the
// batched commit, whose SQL is the same in both): sqliteStore (one
// connection, no cluster) and pgStore (a pool, and the cluster). What
// differs in their SQL is a method of sqliteDialect or pgDialect rather
// than a branch in the core. Open picks the dialect from the DSN and
// returns the Store handle that callers hold.
package store
