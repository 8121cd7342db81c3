package scheduler

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// stubbornPoller blocks until its context is cancelled, then takes linger
// more to return (an exec poll waiting out its WaitDelay for a grandchild
// that holds its pipes).
type stubbornPoller struct{ linger time.Duration }

func (p stubbornPoller) Poll(ctx context.Context) sources.Result {
	<-ctx.Done()
	time.Sleep(p.linger)
	return sources.Result{Err: ctx.Err(), ExitCode: -1}
}

// Shutdown returns within its timeout, in fake time, also when a poll
// outlives it and ignores its cancellation for 10 s (round 1: timeout plus
// however long the poll took to end): a poll that ends after its
// cancellation within the grace is recorded as interrupted; one that does
// not is left behind and logged, and Shutdown still succeeds (exit 0).
func TestShutdownWithinTimeout(t *testing.T) {
	tests := []struct {
		name            string
		timeout, linger time.Duration
		wantInterrupted bool
	}{
		{"poll ends when cancelled", 2 * time.Second, 0, true},
		{"poll ends 50 ms after its cancellation", 2 * time.Second, 50 * time.Millisecond, true},
		{"poll ignores its cancellation for 10 s", 2 * time.Second, 10 * time.Second, false},
		{"timeout 0", 0, 0, true},
		{"timeout 30 s, poll ignores its cancellation", 30 * time.Second, 10 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				cfg := writeConfig(t, dir, lifecycleDefaults+"  - {name: slow, type: exec, command: [\"true\"], timeout: 1h}\n")
				logs := newLogCapture()
				h := startWith(t, dir, cfg, slog.New(logs), func(*config.Source) (sources.Poller, error) {
					return stubbornPoller{linger: tt.linger}, nil
				})
				defer h.store.Close()
				waitUntil(t, "the poll", 5*time.Second, func() bool { return h.s.inflightN.Load() > 0 })
				began := time.Now()
				err := h.s.Shutdown(tt.timeout)
				took := time.Since(began)
				if took > max(tt.timeout, shutdownGrace(0)) {
					t.Errorf("Shutdown(%v) took %v", tt.timeout, took)
				}
				if err != nil {
					t.Errorf("Shutdown: %v", err)
				}
				left := logs.lines("shutdown: polls in flight did not end after their cancellation; leaving them unrecorded")
				if (len(left) == 1) == tt.wantInterrupted {
					t.Errorf("%d lines about polls left behind; want them only when the poll is not recorded", len(left))
				}
				recs, herr := h.store.History(context.Background(), "slow", 5)
				if herr != nil {
					t.Fatal(herr)
				}
				if got := len(recs) == 1 && recs[0].Outcome == store.OutcomeInterrupted; got != tt.wantInterrupted {
					t.Errorf("records %+v; want an interrupted one: %v", recs, tt.wantInterrupted)
				}
				time.Sleep(tt.linger) // the poll left behind ends before the bubble does
			})
		})
	}
}

// With the store's write lock held by another process (SQLite's busy
// timeout is 5 s), Shutdown still returns within its timeout (round 1: the
// final flush retried for a fixed 10 s). Real time: the store waits in C.
func TestShutdownWithinTimeoutStoreLocked(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "concurrency: 2\nsources:\n"+flakySource("a", "schedule: \"@every 100ms\""))
	path := filepath.Join(dir, "pacer.db")
	st, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(cfg, Options{Store: st, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a poll", 5*time.Second, func() bool { o, _ := s.Source("a"); return o.PollsTotal > 0 })
	release := holdWriteLock(t, path)
	// A change that the store must commit (Pause returns after its
	// commit wait, the commit still waiting for the lock).
	if _, err := s.Pause("a", "pending"); err != nil {
		t.Fatal(err)
	}
	const timeout = time.Second
	began := time.Now()
	err = s.Shutdown(timeout)
	took := time.Since(began)
	// A generous bound that still fails round 1's 10 s (and a busy
	// timeout of 5 s).
	if took > timeout+2*time.Second {
		t.Errorf("Shutdown(%v) with the store locked took %v", timeout, took)
	}
	if err == nil || !strings.Contains(err.Error(), "final flush") {
		t.Errorf("Shutdown: %v, want a final flush error", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	// The flusher left in its commit ends once the store answers.
	done := make(chan struct{})
	go func() { s.flushing.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the flusher did not end after the lock was released")
	}
}
