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
	"github.com/pacer-dev/pacer/domain"
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
// however long the poll took to end), and the poll is recorded as
// interrupted either way (contract 3.10): when it ends after its
// cancellation within the grace, with its own end; when it does not, at
// the grace's end without it (logged), and its late end changes nothing.
func TestShutdownWithinTimeout(t *testing.T) {
	tests := []struct {
		name            string
		timeout, linger time.Duration
		wantAbandoned   bool // recorded without its end
	}{
		{"poll ends when cancelled", 2 * time.Second, 0, false},
		{"poll ends 50 ms after its cancellation", 2 * time.Second, 50 * time.Millisecond, false},
		{"poll ignores its cancellation for 10 s", 2 * time.Second, 10 * time.Second, true},
		{"timeout 0", 0, 0, false},
		{"timeout 30 s, poll ignores its cancellation", 30 * time.Second, 10 * time.Second, true},
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
				waitUntil(t, "the poll", 5*time.Second, func() bool { return h.s.wk.inflightN.Load() > 0 })
				began := time.Now()
				err := h.s.Shutdown(tt.timeout)
				took := time.Since(began)
				if took > max(tt.timeout, shutdownGrace(0)) {
					t.Errorf("Shutdown(%v) took %v", tt.timeout, took)
				}
				if err != nil {
					t.Errorf("Shutdown: %v", err)
				}
				left := logs.lines("shutdown: polls in flight did not end after their cancellation; recorded as interrupted without waiting for them")
				if (len(left) == 1) != tt.wantAbandoned {
					t.Errorf("%d lines about polls recorded without their end; want one: %v", len(left), tt.wantAbandoned)
				}
				// The polls cut off are named: they count as nothing, also
				// one that its upstream had answered.
				if cut := logs.lines("shutdown timeout: cancelling polls in flight"); len(cut) != 1 || cut[0]["cut_off"] != "slow" {
					t.Errorf("lines about cancelling the polls in flight: %v; want one naming slow", cut)
				}
				if len(left) == 1 && left[0]["abandoned"] != "slow" {
					t.Errorf("the line about polls recorded without their end: %v; want it naming slow", left[0])
				}
				recs, herr := h.store.History(context.Background(), "slow", 5)
				if herr != nil {
					t.Fatal(herr)
				}
				if len(recs) != 1 || recs[0].Outcome != domain.OutcomeInterrupted {
					t.Fatalf("records %+v; want one interrupted", recs)
				}
				if got := recs[0].Error == abandonedError; got != tt.wantAbandoned {
					t.Errorf("record %+v; want the error %q: %v", recs[0], abandonedError, tt.wantAbandoned)
				}
				if st := h.stored("slow"); st.PollsTotal != 0 || st.NextRunAt == nil || st.NextRunAt.After(recs[0].StartedAt) {
					t.Errorf("stored state %+v; an interrupted poll counts for nothing and leaves its source due from its start %v", st, recs[0].StartedAt)
				}
				time.Sleep(tt.linger) // the poll left behind ends before the bubble does
				synctest.Wait()
				if n := h.metric("pacer_polls_total", "outcome", domain.OutcomeInterrupted); n != 1 {
					t.Errorf("pacer_polls_total{outcome=interrupted} = %v after the poll's late end; want 1", n)
				}
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
	go func() { s.life.flushing.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the flusher did not end after the lock was released")
	}
}
