package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lockProbe is a slog.Handler that, for each line, checks that another
// goroutine can take the scheduler's lock while the line is written.
type lockProbe struct {
	s                *atomic.Pointer[Scheduler]
	lines, underLock *atomic.Int32
}

func (p lockProbe) Enabled(context.Context, slog.Level) bool { return true }
func (p lockProbe) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p lockProbe) WithGroup(string) slog.Handler            { return p }

func (p lockProbe) Handle(context.Context, slog.Record) error {
	s := p.s.Load()
	if s == nil {
		return nil
	}
	p.lines.Add(1)
	if heldByCaller(&s.tab.mu) {
		p.underLock.Add(1)
	}
	return nil
}

// heldByCaller reports whether mu stays locked for 2 s while another
// goroutine tries to take it: the caller holds it (a lock taken for a
// moment by someone else is free again long before).
func heldByCaller(mu *sync.Mutex) bool {
	got := make(chan struct{})
	go func() {
		mu.Lock()
		mu.Unlock()
		close(got)
	}()
	select {
	case <-got:
		return false
	case <-time.After(2 * time.Second):
		return true
	}
}

// TestNoLogUnderLock: the lines of an operator's action and of a reload,
// both noted under the scheduler's lock, are written once it is released.
func TestNoLogUnderLock(t *testing.T) {
	p := lockProbe{s: &atomic.Pointer[Scheduler]{}, lines: &atomic.Int32{}, underLock: &atomic.Int32{}}
	dir := t.TempDir()
	body := lifecycleDefaults + "  - {name: a, type: exec, command: [\"true\"], schedule: \"@every 1h\"}\n"
	h := startWith(t, dir, writeConfig(t, dir, body), slog.New(p), nil)
	defer h.stop()
	p.s.Store(h.s)
	if _, err := h.s.Pause("a", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Reload(t.Context(), writeConfig(t, dir, body)); err != nil {
		t.Fatal(err)
	}
	if p.lines.Load() < 2 || p.underLock.Load() != 0 {
		t.Errorf("%d lines written, %d of them under the scheduler's lock; want at least 2, none under it", p.lines.Load(), p.underLock.Load())
	}
}
