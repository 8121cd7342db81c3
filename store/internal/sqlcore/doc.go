// Package sqlcore is the part of the store that its two backends share
// (store/sqlite, store/postgres): the tables (models.go), the packed poll
// history (history.go), the batched commit through prepared statements
// (write.go), the raw-SQL read of every state (read.go), the commands and
// the outbox. Its Core holds the connections and implements every method
// of store.Backend whose SQL is the same in both dialects; what differs is
// asked of a Dialect, which each backend implements.
package sqlcore
