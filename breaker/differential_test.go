package breaker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
)

// reference is gobreaker's in-memory CircuitBreaker configured as Breaker
// claims to behave: MaxRequests 1 (one probe), Interval 0 (closed counts
// are never cleared by time), Timeout the cooldown, tripping at Failures
// consecutive failures (never when 0), excluded errors neither success nor
// failure.
func reference(p Policy) *gobreaker.CircuitBreaker[struct{}] {
	return gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name: "ref", MaxRequests: 1, Timeout: p.Cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return p.Failures > 0 && c.ConsecutiveFailures >= uint32(p.Failures)
		},
		IsExcluded: func(err error) bool {
			var x excluded
			return errors.As(err, &x)
		},
	})
}

// refState is gobreaker's state in Breaker's names.
func refState(s gobreaker.State) string {
	switch s {
	case gobreaker.StateOpen:
		return Open
	case gobreaker.StateHalfOpen:
		return HalfOpen
	}
	return Closed
}

// stateAt is b's state as gobreaker reports it at now: an open breaker
// whose cooldown has passed (strictly) is half-open, its next call the
// probe (Breaker reports it Open until that call; the scheduler compares
// Until with its clock, see Snapshot.StateAt and policy.BreakerOf).
func stateAt(b *Breaker, now time.Time) string {
	s := b.Snapshot()
	if s.State == Open && s.Until.Before(now) {
		return HalfOpen
	}
	return s.State
}

// TestBreakerMatchesGobreaker drives Breaker and gobreaker's CircuitBreaker
// through the same random sequences of successes, failures, excluded
// results and time steps (in a synctest bubble, whose fake clock both read
// through time.Now), and checks after every step that both made or
// refused the same call, are in the same state, and count the same
// consecutive failures while closed: gobreaker stays the reference for the
// breaker's semantics.
func TestBreakerMatchesGobreaker(t *testing.T) {
	policies := []Policy{
		{Failures: 1, Cooldown: time.Second},
		{Failures: 3, Cooldown: 30 * time.Second},
		{Failures: 5, Cooldown: time.Minute},
		{Failures: 0, Cooldown: time.Minute}, // disabled: never opens
	}
	for _, p := range policies {
		for seed := range uint64(50) {
			t.Run(fmt.Sprintf("failures=%d/cooldown=%v/seed=%d", p.Failures, p.Cooldown, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { compareWithGobreaker(t, p, seed) })
			})
		}
	}
}

func compareWithGobreaker(t *testing.T, p Policy, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(p.Failures)))
	ours, ref := New(p, Snapshot{}, 0), reference(p)
	var trace []string
	for step := range 300 {
		var what string
		switch k := rng.IntN(10); {
		case k < 6: // a call: success, failure or excluded
			o := [...]outcome{succeed, failure, failure, throttle, cancel}[rng.IntN(5)]
			what = o.String()
			errOurs := ours.Do(func() error { return o.err() })
			_, errRef := ref.Execute(func() (struct{}, error) { return struct{}{}, o.err() })
			rejOurs := errors.Is(errOurs, ErrOpen)
			rejRef := errors.Is(errRef, gobreaker.ErrOpenState) || errors.Is(errRef, gobreaker.ErrTooManyRequests)
			if rejOurs != rejRef {
				t.Fatalf("step %d (%s): rejected %v, gobreaker %v (%v)\n%v", step, what, rejOurs, rejRef, errRef, trace)
			}
		default: // a time step: a fraction of the cooldown, exactly it, or past it
			d := [...]time.Duration{p.Cooldown / 3, p.Cooldown, p.Cooldown + time.Nanosecond, time.Millisecond}[rng.IntN(4)]
			what = "sleep " + d.String()
			time.Sleep(d)
		}
		trace = append(trace, what)
		now := time.Now()
		if got, want := stateAt(ours, now), refState(ref.State()); got != want {
			t.Fatalf("step %d (%s): state %s, gobreaker %s\n%v", step, what, got, want, trace)
		}
		if s := ours.Snapshot(); s.State == Closed && ours.failures != ref.Counts().ConsecutiveFailures {
			t.Fatalf("step %d (%s): %d consecutive failures, gobreaker %d\n%v", step, what, ours.failures, ref.Counts().ConsecutiveFailures, trace)
		}
	}
}

// A cooldown too long to represent from now saturates: the breaker opens
// until the latest time.Time can hold, never until a time in the past
// (which would let every call through as a probe).
func TestBreakerHugeCooldownSaturates(t *testing.T) {
	for _, d := range []time.Duration{1<<63 - 1, 1 << 62, 2562047 * time.Hour} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := New(Policy{Failures: 1, Cooldown: d}, Snapshot{}, 0)
				_ = b.Do(func() error { return errBoom })
				s := b.Snapshot()
				if now := time.Now(); s.State != Open || !s.Until.After(now) || s.Until.Sub(now) < d {
					t.Fatalf("after a failure with cooldown %v: %+v at %v", d, s, now)
				}
				time.Sleep(time.Hour)
				if err := b.Do(func() error { return nil }); !errors.Is(err, ErrOpen) {
					t.Fatalf("a call an hour into a cooldown of %v: %v, want ErrOpen", d, err)
				}
			})
		})
	}
}
