// Package domain holds pacer's plain domain types: the durable state of a
// source, its poll records, the notifications of the outbox, the commands
// of the CLI, the batch a commit writes, and the cluster's shards and
// fences.
//
// It is a leaf: it imports nothing of the project, and its types carry no
// storage tags. The store (package store) implements its backends in these
// terms, with rows of its own; the scheduler's rules take and return them.
package domain
