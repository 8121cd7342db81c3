package store

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/pacer-dev/pacer/store/sqlite"
)

// openSQLite opens the SQLite store at path (sqlite.Open) and binds it to
// the daemon lock of opts: it refuses to create a store that the lock file
// says existed (*MissingError) unless opts.NewStore, locks the database
// file it opened, and watches that the file stays the one opened (guard,
// asked before every write). readOnly opens it with SQLite's mode=ro.
func openSQLite(path string, opts Options, readOnly bool) (*sqlite.Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
		opts.Logger = log
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	if err := checkMissing(path, opts); err != nil {
		return nil, err
	}
	s, err := sqlite.Open(path, sqlite.Config{Logger: log, Busy: busy, ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*sqlite.Store, error) {
		return nil, errors.Join(fmt.Errorf("store: open %s: %w", path, err), s.Close())
	}
	if opts.Lock != nil && opts.Lock.f != nil {
		if err := opts.Lock.bind(); err != nil {
			return fail(err)
		}
	}
	g, err := newGuard(path, opts.Lock, log)
	if err != nil {
		return fail(err)
	}
	if g != nil {
		s.Guard = g
	}
	return s, nil
}

// checkMissing refuses to create a store where the lock file says one
// existed (*MissingError), unless opts.NewStore.
func checkMissing(path string, opts Options) error {
	l := opts.Lock
	if l == nil || !l.prev.db.valid() || !Missing(path) {
		return nil
	}
	if opts.NewStore {
		opts.Logger.Warn("store: the store is missing; a new, empty one is created as asked (-new-store)",
			"store", path, "lock", l.path, "previous_pid", l.prev.pid)
		return nil
	}
	return &MissingError{Store: path, Lock: l.path, PID: l.prev.pid}
}
