package store_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

func benchStore(b *testing.B) *store.Store {
	b.Helper()
	s, err := store.Open(filepath.Join(b.TempDir(), "pacer.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

func benchStates(n int) []domain.SourceState {
	states := make([]domain.SourceState, n)
	for i := range states {
		states[i] = fullState(fmt.Sprintf("src-%06d", i))
	}
	return states
}

const benchKeep = 100

// fillHistory gives every source benchKeep records already, so that the
// benchmarks measure the steady state, where every new record trims one.
func fillHistory(b *testing.B, s *store.Store, states []domain.SourceState) {
	b.Helper()
	for i := range benchKeep {
		recs := make([]domain.PollRecord, len(states))
		for j := range states {
			recs[j] = record(states[j].Name, base().Add(-time.Duration(i+1)*time.Second), domain.OutcomeSuccess)
		}
		if err := s.SaveBatch(b.Context(), states, recs, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveBatch commits 1000 states (and one record each, history
// trimmed to 100) per transaction, as the daemon's flusher does under load.
func BenchmarkSaveBatch(b *testing.B) {
	const n = 1000
	s := benchStore(b)
	states := benchStates(n)
	fillHistory(b, s, states)
	records := make([]domain.PollRecord, n)
	for i := range records {
		records[i] = record(states[i].Name, base(), domain.OutcomeSuccess)
	}
	round := 0
	for b.Loop() {
		round++
		for i := range states {
			states[i].PollsTotal = int64(round)
			records[i].StartedAt = base().Add(time.Duration(round) * time.Second)
		}
		if err := s.SaveBatch(b.Context(), states, records, benchKeep); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/state")
}

// BenchmarkSaveSingle commits one state (and its record) per transaction.
func BenchmarkSaveSingle(b *testing.B) {
	const n = 1000
	s := benchStore(b)
	states := benchStates(n)
	fillHistory(b, s, states)
	i := 0
	for b.Loop() {
		st := states[i%n]
		st.PollsTotal = int64(i)
		rec := record(st.Name, base().Add(time.Duration(i)*time.Second), domain.OutcomeSuccess)
		if err := s.SaveBatch(b.Context(), []domain.SourceState{st}, []domain.PollRecord{rec}, benchKeep); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/state")
}

// BenchmarkReadOne measures the reads of one source that the admin API,
// the CLI and a reload make (GetState, History of 100 records), through
// gorm: they are not on the path of every poll, so they stay in gorm
// unless this shows they matter.
//
//	go test ./store -run '^$' -bench BenchmarkReadOne
func BenchmarkReadOne(b *testing.B) {
	const n = 1000
	s := benchStore(b)
	states := benchStates(n)
	fillHistory(b, s, states)
	b.Run("GetState", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok, err := s.GetState(b.Context(), states[i%n].Name); err != nil || !ok {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.Run("History100", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if h, err := s.History(b.Context(), states[i%n].Name, benchKeep); err != nil || len(h) != benchKeep {
				b.Fatal(len(h), err)
			}
			i++
		}
	})
}
