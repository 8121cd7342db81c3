package scheduler

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

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
			h.s.mu.Lock()
			var got, want []string
			for name := range h.s.entries {
				got = append(got, name)
			}
			for _, s := range step.sources {
				want = append(want, s[0])
				e := h.s.entries[s[0]]
				if e == nil {
					continue
				}
				if sh := store.ShardOf(s[0], s[1]); e.shard != sh || e.src.Limit != s[1] {
					t.Errorf("%s: %s has shard %d and group %q, want %d and %q", step.name, s[0], e.shard, e.src.Limit, sh, s[1])
				}
				if old := prev[s[0]]; old != nil && old != e {
					t.Errorf("%s: %s got a new entry", step.name, s[0])
				}
			}
			prev = maps.Clone(h.s.entries)
			h.s.mu.Unlock()
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: sources %v, want %v", step.name, got, want)
			}
		}
	})
}
