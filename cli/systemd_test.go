package cli

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/store"
)

func TestFDCap(t *testing.T) {
	tests := []struct {
		soft uint64
		want int
	}{
		{0, 1}, {64, 1}, {68, 1}, {256, 48}, {1024, 240}, {65536, 16368}, {1 << 40, 1 << 20},
	}
	for _, tc := range tests {
		if got := fdCap(tc.soft, fdsPerPoll); got != tc.want {
			t.Errorf("fdCap(%d) = %d, want %d", tc.soft, got, tc.want)
		}
		// The cap always leaves the headroom free.
		if got := fdCap(tc.soft, fdsPerPoll); tc.soft > fdHeadroom && uint64(got*fdsPerPoll+fdHeadroom) > tc.soft && got > 1 {
			t.Errorf("fdCap(%d) = %d does not fit", tc.soft, got)
		}
	}
}

// TestPollFDsCountDeliveries (issue 20 item 12): a delivery's spool file
// and a command's pipes count in a poll's descriptors, so a configuration
// with a delivery command runs under RLIMIT_NOFILE 256 with a cap whose
// polls, deliveries included, fit: (256-64)/11 = 17, not 48.
func TestPollFDsCountDeliveries(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) *config.Config {
		t.Helper()
		p := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(p, os.LookupEnv)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	plain := load("sources:\n  - {name: a, type: exec, command: [\"true\"]}\n")
	if got := pollFDs(plain); got != fdsPerPoll {
		t.Errorf("pollFDs without deliveries = %d, want %d", got, fdsPerPoll)
	}
	withHook := load("sources:\n  - {name: a, type: exec, command: [\"true\"]}\n" +
		"  - {name: b, type: exec, command: [\"true\"], deliver: {webhook: {url: \"http://127.0.0.1:1/in\"}}}\n")
	if got := pollFDs(withHook); got != fdsPerPoll+2 {
		t.Errorf("pollFDs with a webhook delivery = %d, want %d (its spool file and connection)", got, fdsPerPoll+2)
	}
	withCommand := load("defaults:\n  deliver: {command: [sh, -c, 'cat >/dev/null'], webhook: {url: \"http://127.0.0.1:1/in\"}}\n" +
		"sources:\n  - {name: a, type: exec, command: [\"true\"]}\n")
	per := pollFDs(withCommand)
	if per < fdsPerPoll+7 {
		t.Errorf("pollFDs with a delivery command = %d; a command's stdin and stderr pipes, /dev/null, pidfd and the spool file need %d more than %d",
			per, 7, fdsPerPoll)
	}
	if got := fdCap(256, per); got*per+fdHeadroom > 256 || got < 1 {
		t.Errorf("fdCap(256, %d) = %d does not fit", per, got)
	}
	t.Logf("per poll: %d plain, %d with a webhook, %d with a command; cap under 256: %d", pollFDs(plain), pollFDs(withHook), per, fdCap(256, per))
}

func TestStatusLine(t *testing.T) {
	if got, want := statusLine(1204, 12, 3), "polling 1,204 sources, 12 in flight, 3 in error"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := statusLine(100000, 0, 0); !strings.HasPrefix(got, "polling 100,000 sources") {
		t.Errorf("got %q", got)
	}
}

// TestWatchdogStopsWhenLoopStalls runs the real scheduler with a loop hook
// that can stall it: keep-alives flow while it makes progress, stop while it
// is stalled, and resume after.
func TestWatchdogStopsWhenLoopStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte("store: pacer.db\nadmin: {listen: \"\"}\nsources: []\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, os.LookupEnv)
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(cfg.Store, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var stalled atomic.Bool
		release := make(chan struct{})
		s, err := scheduler.New(cfg, scheduler.Options{Store: st, Registry: prometheus.NewRegistry(), LoopHook: func() {
			if stalled.Load() {
				<-release
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var pings, statuses int
		notify := func(state string) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case state == "WATCHDOG=1":
				pings++
			case strings.HasPrefix(state, "STATUS=polling 0 sources"):
				statuses++
			}
		}
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			return pings
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			supervise(ctx, 2*time.Second, 5*time.Second, func(ctx context.Context) error { return s.Healthy(ctx, 1500*time.Millisecond) },
				func() string { return statusLine(s.Summary()) }, notify, slog.New(slog.DiscardHandler))
		}()

		time.Sleep(5 * time.Second)
		if n := count(); n < 4 {
			t.Fatalf("%d keep-alives in 5s at a 2s watchdog", n)
		}
		stalled.Store(true)
		time.Sleep(3 * time.Second) // the loop's last pass is now older than 1.5s
		before := count()
		time.Sleep(10 * time.Second)
		if n := count(); n != before {
			t.Fatalf("%d keep-alives sent while the loop was stalled", n-before)
		}
		stalled.Store(false)
		close(release)
		time.Sleep(3 * time.Second)
		if n := count(); n <= before {
			t.Fatalf("keep-alives did not resume")
		}
		mu.Lock()
		if statuses < 2 {
			t.Errorf("%d STATUS lines in 21s at one per 5s", statuses)
		}
		mu.Unlock()
		cancel()
		<-done
		if err := s.Shutdown(time.Second); err != nil {
			t.Fatal(err)
		}
	})
}
