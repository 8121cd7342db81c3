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
	"github.com/pacer-dev/pacer/scheduler/policy"
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
		h.s.deps.deliverer = dl
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
				if o.State != policy.StatePending && o.State != policy.StateOK {
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

// TestDescriptorCapPerConfiguration (issue 20 item 12): the descriptor
// cap depends on the configuration (a delivery's pipes and spool file
// count in a poll's descriptors), so it is computed again on a reload
// that adds or removes deliveries, and pacer_concurrency_limit follows.
func TestDescriptorCapPerConfiguration(t *testing.T) {
	dir := t.TempDir()
	// As the daemon computes it: 192 descriptors for polls, 4 a poll, 11
	// with a delivery command.
	descCap := func(cfg *config.Config) int {
		per := 4
		for _, src := range cfg.Sources {
			per = max(per, 4+deliver.Descriptors(src.Deliver))
		}
		return 192 / per
	}
	plain := "concurrency: 64\nsources:\n  - {name: a, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\"}\n"
	delivering := plain + "  - {name: b, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\", deliver: {command: [\"true\"]}}\n"
	st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, store: st, reg: prometheus.NewRegistry()}
	h.s, err = New(writeConfig(t, dir, delivering), Options{Store: st, Registry: h.reg, DescriptorCap: descCap})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	want := 192 / (4 + deliver.Descriptors(&config.Deliver{Command: []string{"true"}}))
	if got := h.metric("pacer_concurrency_limit"); int(got) != want {
		t.Errorf("with a delivery command: pacer_concurrency_limit %v, want %d", got, want)
	}
	for _, step := range []struct {
		body string
		want int
	}{{plain, 48}, {delivering, want}} {
		if err := h.s.Reload(t.Context(), writeConfig(t, dir, step.body)); err != nil {
			t.Fatal(err)
		}
		if got := h.metric("pacer_concurrency_limit"); int(got) != step.want {
			t.Errorf("after a reload: pacer_concurrency_limit %v, want %d", got, step.want)
		}
	}
}
