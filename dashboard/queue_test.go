package dashboard_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/store"
)

// The explanation knows what only the running scheduler knows: with one
// permit held by a poll that hangs, that source is "polling now" and the
// next one triggered is "waiting for a permit", in the API's "why" and on
// the page.
func TestWhyFromTheQueues(t *testing.T) {
	dir := t.TempDir()
	cfgText := `store: pacer.db
concurrency: 1
defaults: {schedule: "0 0 1 1 *", timeout: 30s}
sources:
  - {name: hang, type: exec, command: ["sleep", "30"]}
  - {name: next, type: exec, command: ["true"]}
  - {name: third, type: exec, command: ["true"]}
`
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(cfg.Store, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := scheduler.New(cfg, scheduler.Options{Store: st, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sched.Shutdown(time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	why := func(name string) string {
		o, err := sched.ExplainSource(name)
		if err != nil {
			t.Fatal(err)
		}
		return o.Why
	}
	waitWhy := func(name, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for why(name) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: why %q, want %q", name, why(name), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, n := range []string{"hang", "next", "third"} {
		if w := why(n); !strings.HasPrefix(w, "first poll in ") {
			t.Errorf("%s, never polled: why %q", n, w)
		}
	}
	if err := sched.Trigger("hang"); err != nil {
		t.Fatal(err)
	}
	waitWhy("hang", "polling now")
	if err := sched.Trigger("next"); err != nil {
		t.Fatal(err)
	}
	if err := sched.Trigger("third"); err != nil {
		t.Fatal(err)
	}
	waitWhy("next", "waiting for a permit")
	waitWhy("third", "waiting for a permit (1 ahead)")
	all := sched.ExplainSources(nil)
	if len(all) != 3 || all[0].Why != "polling now" || all[1].Why != "waiting for a permit" || all[2].Why != "waiting for a permit (1 ahead)" {
		t.Errorf("ExplainSources(nil) = %+v", all)
	}
	if got := sched.ExplainSources([]string{"third", "nope", "hang"}); len(got) != 2 || got[0].Name != "third" || got[1].Name != "hang" {
		t.Errorf("ExplainSources(third, nope, hang) = %+v", got)
	}
	// "polling now" is shown from the moment a worker holds the job; the
	// in-flight count follows when the poll itself starts.
	deadline := time.Now().Add(10 * time.Second)
	for {
		inflight, limit := sched.Load()
		if inflight == 1 && limit == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Load = %d, %d; want 1, 1", inflight, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
