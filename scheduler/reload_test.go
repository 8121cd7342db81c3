package scheduler

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// TestReloadSequence checks, over a sequence of reloads, that the scheduler
// holds exactly the configured sources after each one (a kept source is told
// from a removed one by a mark flipped per reload, so two reloads in a row
// must not confuse the marks), that an unchanged source keeps its entry, and
// that a source moved to another limits group gets that group's shard.
func TestReloadSequence(t *testing.T) {
	const limits = "limits:\n  g: {concurrency: 1}\n  h: {concurrency: 1}\nsources:\n"
	src := func(name, limit string) string {
		if limit == "" {
			return flakySource(name, "")
		}
		return flakySource(name, "limit: "+limit)
	}
	steps := []struct {
		name    string
		sources [][2]string // name, limit group
	}{
		{"start", [][2]string{{"a", ""}, {"b", "g"}, {"c", ""}}},
		{"one removed, one added", [][2]string{{"a", ""}, {"b", "g"}, {"d", ""}}},
		{"another removed, another added", [][2]string{{"a", ""}, {"b", "g"}, {"e", ""}}},
		{"nothing changes", [][2]string{{"a", ""}, {"b", "g"}, {"e", ""}}},
		{"back to d", [][2]string{{"a", ""}, {"b", "g"}, {"d", ""}}},
		{"same set again", [][2]string{{"a", ""}, {"b", "g"}, {"d", ""}}},
		{"group changes", [][2]string{{"a", "h"}, {"b", "g"}, {"d", ""}}},
		{"two removed", [][2]string{{"b", "g"}}},
		{"back", [][2]string{{"a", ""}, {"b", "g"}, {"c", ""}, {"d", ""}}},
	}
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := func(i int) string {
			var sb strings.Builder
			sb.WriteString(strings.Replace(lifecycleDefaults, "sources:\n", "", 1))
			sb.WriteString(limits)
			for _, s := range steps[i].sources {
				sb.WriteString(src(s[0], s[1]))
			}
			return sb.String()
		}
		h := start(t, dir, writeConfig(t, dir, body(0)))
		defer h.stop()
		var prev map[string]*entry
		for i, step := range steps {
			if i > 0 {
				if err := h.s.Reload(t.Context(), writeConfig(t, dir, body(i))); err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
			}
			h.s.tab.mu.Lock()
			var got, want []string
			for name := range h.s.tab.entries {
				got = append(got, name)
			}
			for _, s := range step.sources {
				want = append(want, s[0])
				e := h.s.tab.entries[s[0]]
				if e == nil {
					continue
				}
				if sh := domain.ShardOf(s[0], s[1]); e.shard != sh || e.src.Limit != s[1] {
					t.Errorf("%s: %s has shard %d and group %q, want %d and %q", step.name, s[0], e.shard, e.src.Limit, sh, s[1])
				}
				if old := prev[s[0]]; old != nil && old != e {
					t.Errorf("%s: %s got a new entry", step.name, s[0])
				}
			}
			prev = maps.Clone(h.s.tab.entries)
			h.s.tab.mu.Unlock()
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: sources %v, want %v", step.name, got, want)
			}
		}
	})
}

// TestReloadRebuildsPollerOnNewSource: a poller holds its source, so a
// reload whose source is equal in effect but another value (the config
// parsed again) builds the poller on the new one and keeps the entry, and
// a reload that shares the source with the config before
// (config.Options.Previous) builds nothing.
func TestReloadRebuildsPollerOnNewSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		// http sources (exec ones are always parsed again); the poller
		// is a no-op, nothing is sent.
		body := lifecycleDefaults + "  - {name: a, type: http, url: \"http://127.0.0.1:1/a\", schedule: \"@every 1h\"}\n" +
			"  - {name: b, type: http, url: \"http://127.0.0.1:1/b\", schedule: \"@every 1h\"}\n"
		cfg := writeConfig(t, dir, body)
		st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var mu sync.Mutex
		built := map[string]*config.Source{}
		s, err := New(cfg, Options{Store: st, Registry: prometheus.NewRegistry(),
			NewPoller: func(src *config.Source) (sources.Poller, error) {
				mu.Lock()
				defer mu.Unlock()
				built[src.Name] = src
				return noopPoller{}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Shutdown(3 * time.Second); err != nil {
				t.Error(err)
			}
		}()
		entryA := func() *entry { s.tab.mu.Lock(); defer s.tab.mu.Unlock(); return s.tab.entries["a"] }
		before := entryA()
		check := func(step string, cfg *config.Config) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			for _, name := range []string{"a", "b"} {
				want, _ := cfg.Source(name)
				if built[name] != want {
					t.Errorf("%s: the poller of %s was built on another source than the config's", step, name)
				}
			}
		}
		check("start", cfg)
		again := writeConfig(t, dir, body) // parsed again: equal, other values
		if err := s.Reload(t.Context(), again); err != nil {
			t.Fatal(err)
		}
		check("parsed again", again)
		if entryA() != before {
			t.Error("an unchanged source lost its entry")
		}
		shared, err := config.LoadWith(again.Path, os.LookupEnv, config.Options{Previous: again})
		if err != nil {
			t.Fatal(err)
		}
		if shared.Reused() == 0 {
			t.Fatal("nothing reused")
		}
		mu.Lock()
		clear(built)
		mu.Unlock()
		if err := s.Reload(t.Context(), shared); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(built) != 0 {
			t.Errorf("a reload sharing every source built %d pollers", len(built))
		}
		mu.Unlock()
	})
}

// TestReloadRemoveReAddKeepsDueTime: a source removed by one SIGHUP and
// re-added unchanged by the next keeps its due time (rule 3.11: re-adding
// it unchanged restores its state), as a cluster hand-over does. Before,
// when the two reloads came within the flusher's delay of its last poll,
// the store still held that poll's due time (past) and the re-added source
// was polled at once (issue 20 item 16c: 204-495 ms after its previous poll
// on "@every 1s").
func TestReloadRemoveReAddKeepsDueTime(t *testing.T) {
	for _, after := range []time.Duration{0, 10 * time.Millisecond, 40 * time.Millisecond, 300 * time.Millisecond} {
		t.Run(after.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				both := lifecycleDefaults + "  - {name: a, type: exec, command: [\"true\"]}\n  - {name: b, type: exec, command: [\"true\"]}\n"
				onlyB := lifecycleDefaults + "  - {name: b, type: exec, command: [\"true\"]}\n"
				s, log := startRecording(t, dir, writeConfig(t, dir, both), nil)
				waitUntil(t, "three polls of a", 10*time.Second, func() bool { return len(log.times("a")) >= 3 })
				time.Sleep(after) // from a's last poll (within waitUntil's 10 ms)
				if err := s.Reload(t.Context(), writeConfig(t, dir, onlyB)); err != nil {
					t.Fatal(err)
				}
				if err := s.Reload(t.Context(), writeConfig(t, dir, both)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Second)
				for i, g := range gaps(log.times("a")) {
					if g < time.Second-time.Millisecond || g > time.Second+10*time.Millisecond {
						t.Errorf("gap %d between polls of a on @every 1s: %v (reloaded %v after a poll)", i, g, after)
					}
				}
			})
		})
	}
}

// TestPollersBuiltWithoutLock: a poller's build (which may read files and
// resolve settings) runs without the scheduler's lock, at start and at a
// reload: another goroutine takes the lock while it runs.
func TestPollersBuiltWithoutLock(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var s *Scheduler
	var builds, underLock atomic.Int32
	newPoller := func(*config.Source) (sources.Poller, error) {
		builds.Add(1)
		if heldByCaller(&s.tab.mu) {
			underLock.Add(1)
		}
		return noopPoller{}, nil
	}
	body := lifecycleDefaults + "  - {name: a, type: exec, command: [\"true\"], schedule: \"@every 1h\"}\n"
	s, err = New(writeConfig(t, dir, body), Options{Store: st, Registry: prometheus.NewRegistry(), NewPoller: newPoller})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Shutdown(3 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	cfg := writeConfig(t, dir, body+"  - {name: b, type: exec, command: [\"true\"], schedule: \"@every 1h\"}\n")
	if err := s.Reload(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if builds.Load() < 2 || underLock.Load() != 0 {
		t.Errorf("%d pollers built, %d of them under the scheduler's lock; want at least 2, none under it", builds.Load(), underLock.Load())
	}
}
