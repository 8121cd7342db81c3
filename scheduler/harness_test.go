package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/sqlitetest"
	"github.com/pacer-dev/pacer/internal/waitfor"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

// harness runs a real scheduler on a real SQLite store in a temp dir.
type harness struct {
	t     *testing.T
	dir   string
	store *store.Store
	reg   *prometheus.Registry
	s     *Scheduler
}

// writeConfig writes body (YAML without the store key) into dir and loads it.
func writeConfig(t *testing.T, dir, body string) *config.Config {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("store: pacer.db\nadmin: {listen: \"\"}\n"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// start opens the store in dir and starts a scheduler on cfg.
func start(t *testing.T, dir string, cfg *config.Config) *harness {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, store: st, reg: prometheus.NewRegistry()}
	h.s, err = New(cfg, Options{Store: st, Registry: h.reg, CommandInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

// stop shuts the scheduler down and closes the store.
func (h *harness) stop() {
	h.t.Helper()
	if err := h.s.Shutdown(5 * time.Second); err != nil {
		h.t.Errorf("shutdown: %v", err)
	}
	if err := h.store.Close(); err != nil {
		h.t.Errorf("close store: %v", err)
	}
}

func (h *harness) source(name string) view.SourceObject {
	h.t.Helper()
	o, err := h.s.Source(name)
	if err != nil {
		h.t.Fatal(err)
	}
	return o
}

// waitFor is waitUntil on the harness's test.
func (h *harness) waitFor(what string, limit time.Duration, cond func() bool) {
	h.t.Helper()
	waitUntil(h.t, what, limit, cond)
}

// waitUntil polls cond every 10ms (of the bubble's fake time, or real time)
// until it holds, failing after limit.
func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	waitfor.True(t, limit, what, cond)
}

// stored reads name's committed state through a second store handle.
func (h *harness) stored(name string) domain.SourceState {
	h.t.Helper()
	st, err := store.Open(filepath.Join(h.dir, "pacer.db"), store.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	s, ok, err := st.GetState(context.Background(), name)
	if err != nil || !ok {
		h.t.Fatalf("stored state of %s: found=%v err=%v", name, ok, err)
	}
	return s
}

// metric returns the value of a counter or gauge (a histogram: its count)
// with the given labels, 0 if there is none.
func (h *harness) metric(name string, labels ...string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// series returns how many series the metric family name has.
func (h *harness) series(name string) int {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

// setFail creates or removes a file that the exec sources of these tests test
// for: `test ! -e fail` succeeds while it is absent.
func setFail(t *testing.T, dir string, fail bool) {
	t.Helper()
	p := filepath.Join(dir, "fail")
	if fail {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// flakySource is an exec source that fails while dir/fail exists.
func flakySource(name, extra string) string {
	s := "  - name: " + name + "\n    type: exec\n    command: [\"/bin/sh\", \"-c\", \"test ! -e fail\"]\n    dir: .\n"
	for _, line := range strings.Split(strings.TrimSpace(extra), "\n") {
		if line != "" {
			s += "    " + strings.TrimSpace(line) + "\n"
		}
	}
	return s
}

// holdWriteLock takes the write lock of the SQLite file at path from a
// second connection (sqlitetest.HoldWriteLock).
func holdWriteLock(t *testing.T, path string) (release func() error) {
	t.Helper()
	return sqlitetest.HoldWriteLock(t, path)
}
