package cli

// The daemon process's set-up and tear-down around its parts (runner):
// the store's lock and its bounded close, the logger, the admin token,
// the collector's setting during start-up.

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/store"
)

// storeCloseGrace bounds the store's Close at exit: a statement stuck in
// SQLite's busy timeout (another process holds the write lock) would keep
// the daemon up to 5 s past shutdown_timeout.
const storeCloseGrace = time.Second

// closeStore closes st within grace and reports whether it did. When it
// did not, the daemon exits anyway (the process's exit closes what is
// left, and the state that could not be committed was logged by the
// final flush); its lock is then not given back before the exit, so that
// no other daemon opens the store while this one still has it open.
func closeStore(st *store.Store, log *slog.Logger, grace time.Duration) bool {
	done := make(chan error, 1)
	go func() { done <- st.Close() }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("store: close", "err", err)
		}
		return true
	case <-t.C:
		log.Warn("store: close did not finish in time; exiting without waiting for it", "grace", grace)
		return false
	}
}

// daemonLock is the lock a daemon on cfg's store holds: the preload's
// (nil if it took none) or a new one; a member of a cluster gives the
// preload's exclusive lock back for the shared one (rule 8).
func daemonLock(cfg *config.Config, lock *store.Lock) (*store.Lock, error) {
	if cfg.Cluster.Set {
		if lock != nil {
			if err := lock.Release(); err != nil {
				return nil, err
			}
		}
		return memberLock(cfg.Store)
	}
	if lock != nil {
		return lock, nil
	}
	return store.AcquireLock(cfg.Store)
}

func newLogger(c config.Log, env Env) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(env.Stderr, opts))
}

// envTrue reports whether the environment variable key is set to a true
// value (1, true, yes).
func envTrue(env Env, key string) bool {
	v, _ := env.LookupEnv(key)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// readToken reads the admin token file (see config.ReadToken).
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	t, err := config.ReadToken(path)
	if err != nil {
		return "", fmt.Errorf("admin.token_file: %w", err)
	}
	return t, nil
}

// startupGC makes the collector run less often until the returned func is
// called (once; later calls do nothing). Start-up allocates the config's
// YAML node tree and every source's stored state, most of it garbage once
// the daemon runs: with 100,000 sources the default setting collects many
// times over a heap that only grows. A GOGC set higher, or off, is kept.
func startupGC() (restore func()) {
	const startupPercent = 400
	prev := debug.SetGCPercent(startupPercent)
	if prev < 0 || prev >= startupPercent {
		debug.SetGCPercent(prev)
		return func() {}
	}
	return sync.OnceFunc(func() { debug.SetGCPercent(prev) })
}
