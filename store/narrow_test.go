package store_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// A SQLite store writes a state row whole when its columns other than the
// hot ones (those a successful poll changes) differ from what it last
// wrote, and only the key and hot columns otherwise (sqlcore's narrow.go).
// Whatever the path, what a commit wrote is what is read back, after a
// restart too.

// hotStep is st as the next successful poll leaves it: only the hot
// columns change.
func hotStep(st domain.SourceState, d time.Duration) domain.SourceState {
	st.NextRunAt = ptr(st.NextRunAt.Add(d))
	st.LastRunAt = ptr(st.LastRunAt.Add(d))
	st.LastSuccessAt = ptr(st.LastRunAt.Add(time.Millisecond))
	st.PollsTotal++
	st.HistorySeq++
	return st
}

// checkRead checks that s reads back st for its name.
func checkRead(t *testing.T, s *store.Store, st domain.SourceState, what string) {
	t.Helper()
	got := mustGet(t, s, st.Name)
	if want := wantState(st, got); !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtState(got), fmtState(want))
	}
}

func TestNarrowStateRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	s, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := fullState("a")
	other := fullState("b")
	save(t, s, []domain.SourceState{st, other}, nil, 10)
	checkRead(t, s, st, "first write")

	st = hotStep(st, time.Minute)
	save(t, s, []domain.SourceState{st}, nil, 10)
	checkRead(t, s, st, "hot columns changed")

	// The narrow path is taken: a column changed behind the store's back
	// on its own connection (which SQLite's data_version does not count)
	// is left as it is by a write whose other columns are unchanged.
	if err := store.GormDB(s).Exec("UPDATE source_states SET paused_reason = 'behind' WHERE name = 'a'").Error; err != nil {
		t.Fatal(err)
	}
	st = hotStep(st, time.Minute)
	save(t, s, []domain.SourceState{st}, nil, 10)
	if got := mustGet(t, s, "a"); got.PausedReason != "behind" || got.PollsTotal != st.PollsTotal {
		t.Errorf("after a narrow write: paused_reason %q, polls %d; want %q, %d (the hot columns only written)",
			got.PausedReason, got.PollsTotal, "behind", st.PollsTotal)
	}

	// Each other column changed alone is written.
	first := st
	for i, change := range []func(*domain.SourceState){
		func(st *domain.SourceState) { st.PausedReason = "a new reason" },
		func(st *domain.SourceState) { st.Paused = !st.Paused },
		func(st *domain.SourceState) { st.ETag = "" },
		func(st *domain.SourceState) { st.BreakerUntil = nil },
		func(st *domain.SourceState) { st.ConsecutiveFailures = 0 },
		func(st *domain.SourceState) { st.Fingerprint = "new" },
		func(st *domain.SourceState) { st.HeldEvent = "another held event" },
		func(st *domain.SourceState) { *st = first }, // back to values written before
	} {
		change(&st)
		st = hotStep(st, time.Second)
		save(t, s, []domain.SourceState{st}, nil, 10)
		checkRead(t, s, st, "change "+string(rune('0'+i)))
	}

	// Another connection's commit is seen (data_version): the next write of
	// the first store is whole, though its other columns are unchanged.
	s2, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	moved := st
	moved.LastError, moved.Paused = "written by another store", true
	save(t, s2, []domain.SourceState{moved}, nil, 10)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	st = hotStep(st, time.Minute)
	save(t, s, []domain.SourceState{st, hotStep(other, time.Minute)}, nil, 10)
	checkRead(t, s, st, "after another connection's write")

	// A restart reads what was last written.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, store.Options{})
	checkRead(t, s, st, "after a restart")
	checkRead(t, s, hotStep(other, time.Minute), "the other source after a restart")
}
