package breaker

// Benchmarks of the failure-policy path, each with a baseline in the same
// run:
//
//	go test ./breaker -run '^$' -bench . -benchtime=1s -count 3
//
// BenchmarkBackoffDelay is Backoff.Delay against the bare formula it guards
// (min(max, initial*multiplier^(k-1)) with jitter, no checks).
// BenchmarkBreakerDo is Do on a closed breaker (the path of a source with
// failures counted but under the threshold; a healthy source has no
// breaker at all) and on an open one (rejection), against gobreaker's own
// in-memory CircuitBreaker, whose semantics Breaker keeps in a struct that
// can be restored (gobreaker cannot be built in a given state).

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

var sinkDuration time.Duration

func BenchmarkBackoffDelay(b *testing.B) {
	bo := Backoff{Initial: time.Second, Max: 15 * time.Minute, Multiplier: 2, Jitter: 0.1}
	b.Run("Delay", func(b *testing.B) {
		k := 0
		for b.Loop() {
			k++
			sinkDuration = bo.Delay(k%40+1, 0.37)
		}
	})
	b.Run("baseline-formula", func(b *testing.B) {
		k := 0
		for b.Loop() {
			k++
			d := math.Min(float64(bo.Max), float64(bo.Initial)*math.Pow(bo.Multiplier, float64(k%40)))
			sinkDuration = time.Duration(d * (1 + bo.Jitter*(2*0.37-1)))
		}
	})
}

var errBench = errors.New("boom")

// sinkBreaker keeps New's result alive in its benchmark.
var sinkBreaker *Breaker

func BenchmarkBreakerDo(b *testing.B) {
	p := Policy{Failures: 5, Cooldown: time.Minute}
	ok := func() error { return nil }
	b.Run("Do/closed/success", func(b *testing.B) {
		brk := New(p, Snapshot{State: Closed}, 2)
		for b.Loop() {
			_ = brk.Do(ok)
		}
	})
	b.Run("Do/open/rejected", func(b *testing.B) {
		brk := New(p, Snapshot{State: Open, Until: time.Now().Add(time.Hour)}, 0)
		for b.Loop() {
			if err := brk.Do(ok); !errors.Is(err, ErrOpen) {
				b.Fatal(err)
			}
		}
	})
	b.Run("Snapshot", func(b *testing.B) {
		brk := New(p, Snapshot{State: Closed}, 2)
		for b.Loop() {
			_ = brk.Snapshot()
		}
	})
	b.Run("New/closed", func(b *testing.B) {
		for b.Loop() {
			sinkBreaker = New(p, Snapshot{State: Closed}, 1)
		}
	})
	b.Run("baseline-gobreaker/closed/success", func(b *testing.B) {
		cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench", MaxRequests: 1, Timeout: time.Minute,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 }})
		for b.Loop() {
			_, _ = cb.Execute(func() (struct{}, error) { return struct{}{}, ok() })
		}
	})
	b.Run("baseline-gobreaker/open/rejected", func(b *testing.B) {
		cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench", MaxRequests: 1, Timeout: time.Hour,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 }})
		_, _ = cb.Execute(func() (struct{}, error) { return struct{}{}, errBench })
		for b.Loop() {
			if _, err := cb.Execute(func() (struct{}, error) { return struct{}{}, nil }); !errors.Is(err, gobreaker.ErrOpenState) {
				b.Fatal(err)
			}
		}
	})
}
