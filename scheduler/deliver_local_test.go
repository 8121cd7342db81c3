package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/deliver"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// bodyPoller succeeds every call with a new result (a body to deliver).
type bodyPoller struct {
	mu sync.Mutex
	n  int
}

func (p *bodyPoller) Poll(context.Context) sources.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	c := sources.NewCapture("")
	fmt.Fprintf(c, "result %d", p.n)
	return sources.Result{StatusCode: 200, ExitCode: -1, Digest: fmt.Sprintf("d%d", p.n), Body: c}
}

// localDeliverer fails its first n deliveries of each source with a local
// resource error, as deliver.Deliverer does when a command's fork finds no
// descriptor, then delivers.
type localDeliverer struct {
	mu    sync.Mutex
	n     int
	calls map[string]int
}

func (d *localDeliverer) Deliver(_ context.Context, _ *config.Deliver, r deliver.Result, _ func(string) string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[r.Source]++
	if d.calls[r.Source] <= d.n {
		return fmt.Errorf("deliver: command sh: fork/exec /usr/bin/sh: too many open files: %w", sources.ErrLocal)
	}
	return nil
}

// TestDeliveryLocalErrorsNeverBlameTheSource (issue 20 item 12, rule
// 3.14): deliveries that fail for lack of pacer's own resources are
// local_error polls. With breaker.failures and error_after 1, a source
// whose first 5 deliveries fail so stays closed and out of error, with no
// failure counted, and is delivered once the resources are back (before:
// the breaker counted each such delivery, so the source opened).
func TestDeliveryLocalErrorsNeverBlameTheSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		const nsrc, nerr = 4, 5
		body := `
concurrency: 4
defaults:
  schedule: "0 * * * *"
  breaker: {failures: 1, cooldown: 1h}
  error_after: 1
  deliver: {command: ["true"]}
sources:
`
		for i := range nsrc {
			body += fmt.Sprintf("  - {name: s%02d, type: exec, command: [\"true\"]}\n", i)
		}
		cfg := writeConfig(t, dir, body)
		st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{t: t, dir: dir, store: st, reg: prometheus.NewRegistry()}
		h.s, err = New(cfg, Options{Store: st, Registry: h.reg, Logger: slog.New(slog.DiscardHandler), CommandInterval: 2 * time.Second,
			NewPoller: func(*config.Source) (sources.Poller, error) { return &bodyPoller{}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		dl := &localDeliverer{n: nerr, calls: map[string]int{}}
		h.s.deliverer = dl
		if err := h.s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.stop()
		deadline := time.Now().Add(3 * time.Hour)
		for delivered := 0; delivered < nsrc; time.Sleep(time.Second) {
			if time.Now().After(deadline) {
				t.Fatalf("after 3h, %d of %d sources delivered", delivered, nsrc)
			}
			delivered = 0
			for _, o := range h.s.Sources() {
				if o.State != StatePending && o.State != StateOK {
					t.Fatalf("%s entered %s: %+v", o.Name, o.State, o)
				}
				if o.ConsecutiveFailures != 0 || o.LastError != "" || o.Breaker != breaker.Closed || o.FailuresTotal != 0 {
					t.Fatalf("%s blamed for a local error of its delivery: %+v", o.Name, o)
				}
				if o.PollsTotal > 0 {
					delivered++
				}
			}
		}
		if got := h.metric("pacer_polls_total", "outcome", "local_error"); got != nsrc*nerr {
			t.Errorf("local_error polls %v, want %d", got, nsrc*nerr)
		}
		if got := h.metric("pacer_polls_total", "outcome", "failure"); got != 0 {
			t.Errorf("failure polls %v, want 0", got)
		}
		if got := h.metric("pacer_deliveries_total", "outcome", "success"); got != nsrc {
			t.Errorf("deliveries %v, want %d", got, nsrc)
		}
	})
}
