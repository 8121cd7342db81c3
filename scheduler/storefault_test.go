package scheduler

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/store"
)

// TestStoreLocked holds SQLite's write lock from another connection: the
// scheduler keeps polling within its bounds, reports not ready, counts store
// errors, and once the lock is released commits every state it kept.
func TestStoreLocked(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "concurrency: 2\nsources:\n"+flakySource("a", "schedule: \"@every 100ms\"")+flakySource("b", "schedule: \"@every 100ms\""))
	path := filepath.Join(dir, "pacer.db")
	st, err := store.Open(path, store.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, store: st, reg: prometheus.NewRegistry()}
	h.s, err = New(cfg, Options{Store: st, Registry: h.reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	h.waitFor("first polls", 5*time.Second, func() bool { return h.source("a").PollsTotal > 0 })

	release := holdWriteLock(t, path)
	h.waitFor("not ready", 5*time.Second, func() bool { return h.s.Ready(context.Background()) != nil })
	h.waitFor("store errors counted", 5*time.Second, func() bool { return h.metric("pacer_store_errors_total") > 0 })
	during := h.source("a").PollsTotal
	h.waitFor("polling goes on", 5*time.Second, func() bool { return h.source("a").PollsTotal >= during+3 })

	if err := release(); err != nil {
		t.Fatal(err)
	}
	h.waitFor("ready again", 10*time.Second, func() bool { return h.s.Ready(context.Background()) == nil })
	// Pause "a": its state is final, so memory and store can be compared.
	if _, err := h.s.Pause("a", "compare"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("committed", 5*time.Second, func() bool {
		s, mem := h.stored("a"), h.source("a")
		return s.Paused && s.PollsTotal == mem.PollsTotal && s.FailuresTotal == mem.FailuresTotal
	})
}
