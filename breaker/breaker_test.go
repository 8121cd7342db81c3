package breaker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var (
	errBoom     = errors.New("boom")
	errThrottle = errors.New("429 Too Many Requests")
)

// outcome is the result a test's fn returns.
type outcome int

const (
	succeed outcome = iota
	failure
	throttle // Exclude(errThrottle)
	cancel   // Exclude(context.Canceled)
)

func (o outcome) err() error {
	switch o {
	case failure:
		return errBoom
	case throttle:
		return Exclude(errThrottle)
	case cancel:
		return Exclude(context.Canceled)
	}
	return nil
}

// want is what Do returns for o once the Exclude wrapper is removed.
func (o outcome) want() error {
	switch o {
	case failure:
		return errBoom
	case throttle:
		return errThrottle
	case cancel:
		return context.Canceled
	}
	return nil
}

func (o outcome) String() string {
	return [...]string{"success", "failure", "throttle", "cancel"}[o]
}

func newBreaker(t *testing.T, p Policy, snap Snapshot, failures int) *Breaker {
	t.Helper()
	return New(p, snap, failures)
}

// run calls Do with fn returning o's error and checks that fn was called and
// that Do returned exactly what fn returned, unwrapped from Exclude.
func run(t *testing.T, b *Breaker, o outcome) {
	t.Helper()
	called := false
	err := b.Do(func() error { called = true; return o.err() })
	if !called {
		t.Fatalf("Do(%v): fn not called, Do returned %v (state %+v)", o, err, b.Snapshot())
	}
	if err != o.want() {
		t.Fatalf("Do(%v) = %v, want %v", o, err, o.want())
	}
}

// rejected checks that Do returns ErrOpen without calling fn.
func rejected(t *testing.T, b *Breaker) {
	t.Helper()
	called := false
	err := b.Do(func() error { called = true; return nil })
	if called {
		t.Fatalf("Do called fn, want a rejection (state %+v)", b.Snapshot())
	}
	if err != ErrOpen {
		t.Fatalf("Do = %v, want ErrOpen", err)
	}
}

func wantState(t *testing.T, b *Breaker, state string) Snapshot {
	t.Helper()
	s := b.Snapshot()
	if s.State != state {
		t.Fatalf("Snapshot().State = %q, want %q (%+v)", s.State, state, s)
	}
	if state != Open && !s.Until.IsZero() {
		t.Fatalf("Snapshot() = %+v: Until set while not open", s)
	}
	return s
}

func wantOpenUntil(t *testing.T, b *Breaker, until time.Time) {
	t.Helper()
	s := wantState(t, b, Open)
	if !s.Until.Equal(until) {
		t.Fatalf("Snapshot().Until = %v, want %v (off by %v)", s.Until, until, s.Until.Sub(until))
	}
}

func TestBreakerNewIsClosed(t *testing.T) {
	for _, snap := range []Snapshot{{}, {State: Closed}, {State: "bogus"}} {
		b := newBreaker(t, Policy{Failures: 3, Cooldown: time.Minute}, snap, 0)
		wantState(t, b, Closed)
		run(t, b, succeed)
		wantState(t, b, Closed)
	}
}

func TestBreakerOpensAfterFailures(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 10} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cooldown := 90 * time.Second
				b := newBreaker(t, Policy{Failures: n, Cooldown: cooldown}, Snapshot{}, 0)
				for i := 1; i < n; i++ {
					run(t, b, failure)
					wantState(t, b, Closed)
					time.Sleep(time.Second) // the open time is the last failure's
				}
				run(t, b, failure)
				openedAt := time.Now()
				wantOpenUntil(t, b, openedAt.Add(cooldown))

				for range 5 {
					rejected(t, b)
				}
				time.Sleep(cooldown - time.Millisecond)
				rejected(t, b)
				wantOpenUntil(t, b, openedAt.Add(cooldown))
			})
		})
	}
}

// TestBreakerSuccessResetsCount: consecutive means consecutive.
func TestBreakerSuccessResetsCount(t *testing.T) {
	b := newBreaker(t, Policy{Failures: 3, Cooldown: time.Minute}, Snapshot{}, 0)
	for range 10 {
		run(t, b, failure)
		run(t, b, failure)
		run(t, b, succeed)
		wantState(t, b, Closed)
	}
	run(t, b, failure)
	run(t, b, failure)
	run(t, b, failure)
	wantState(t, b, Open)
}

func TestBreakerCooldownAndProbe(t *testing.T) {
	const failures = 3
	cooldown := time.Minute
	tests := []struct {
		probe outcome
		want  string // state after the probe
	}{
		{succeed, Closed},
		{failure, Open},
		{throttle, HalfOpen},
		{cancel, HalfOpen},
	}
	for _, tc := range tests {
		t.Run(tc.probe.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBreaker(t, Policy{Failures: failures, Cooldown: cooldown}, Snapshot{}, 0)
				for range failures {
					run(t, b, failure)
				}
				until := time.Now().Add(cooldown)
				wantOpenUntil(t, b, until)

				time.Sleep(cooldown - time.Nanosecond)
				rejected(t, b)
				time.Sleep(2 * time.Nanosecond)
				run(t, b, tc.probe)
				wantState(t, b, tc.want)

				switch tc.want {
				case Closed:
					// Failures were reset: it takes `failures` again.
					for range failures - 1 {
						run(t, b, failure)
						wantState(t, b, Closed)
					}
					run(t, b, failure)
					wantOpenUntil(t, b, time.Now().Add(cooldown))
				case Open:
					// Another full cooldown from the failed probe.
					again := time.Now().Add(cooldown)
					wantOpenUntil(t, b, again)
					time.Sleep(cooldown - time.Nanosecond)
					rejected(t, b)
					time.Sleep(2 * time.Nanosecond)
					run(t, b, succeed)
					wantState(t, b, Closed)
				case HalfOpen:
					// The excluded probe did not count: the next call is
					// the probe, at once, and decides.
					run(t, b, tc.probe)
					wantState(t, b, HalfOpen)
					run(t, b, failure)
					wantOpenUntil(t, b, time.Now().Add(cooldown))
					rejected(t, b)
				}
			})
		})
	}
}

// TestBreakerExcludedNeitherCountsNorResets covers rule 3.5: throttled and
// cancelled calls are neither failures nor successes.
func TestBreakerExcludedNeitherCountsNorResets(t *testing.T) {
	tests := []struct {
		name  string
		calls []outcome
		want  string
	}{
		{"excluded only", []outcome{throttle, cancel, throttle, throttle, cancel, throttle}, Closed},
		{"excluded do not count", []outcome{failure, throttle, failure, cancel, throttle}, Closed},
		{"excluded do not reset", []outcome{failure, throttle, failure, cancel, failure}, Open},
		{"excluded do not reset, many", []outcome{failure, failure, throttle, throttle, throttle, throttle, throttle, failure}, Open},
		{"success resets across excluded", []outcome{failure, failure, throttle, succeed, failure, cancel, failure}, Closed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBreaker(t, Policy{Failures: 3, Cooldown: time.Minute}, Snapshot{}, 0)
			for _, o := range tc.calls {
				run(t, b, o)
			}
			wantState(t, b, tc.want)
		})
	}

	t.Run("1000 throttles", func(t *testing.T) {
		b := newBreaker(t, Policy{Failures: 2, Cooldown: time.Minute}, Snapshot{}, 1)
		for range 1000 {
			run(t, b, throttle)
		}
		wantState(t, b, Closed)
		run(t, b, failure) // the restored failure still counts
		wantState(t, b, Open)
	})
}

func TestBreakerDisabled(t *testing.T) {
	for _, p := range []Policy{{Failures: 0, Cooldown: time.Minute}, {Failures: -1}, {}} {
		b := newBreaker(t, p, Snapshot{}, 0)
		for range 1000 {
			run(t, b, failure)
		}
		wantState(t, b, Closed)
		run(t, b, succeed)
		wantState(t, b, Closed)
	}
}

// TestBreakerHugeFailures: a threshold or a restored count beyond the
// breaker's uint32 failure counter must not wrap around to a small number.
func TestBreakerHugeFailures(t *testing.T) {
	if strconv.IntSize < 64 {
		return // the values below do not fit in an int
	}
	big := 1<<32 + 1
	b := newBreaker(t, Policy{Failures: big, Cooldown: time.Minute}, Snapshot{}, 0)
	for range 100 {
		run(t, b, failure)
	}
	wantState(t, b, Closed)

	b = newBreaker(t, Policy{Failures: 5, Cooldown: time.Minute}, Snapshot{}, big)
	run(t, b, failure)
	wantState(t, b, Open)
}

func TestBreakerRestore(t *testing.T) {
	const cooldown = time.Minute
	tests := []struct {
		name     string
		policy   int
		snap     func(now time.Time) Snapshot
		failures int
		check    func(t *testing.T, b *Breaker, now time.Time)
	}{
		{
			name:   "open until now+30s",
			policy: 5,
			snap:   func(now time.Time) Snapshot { return Snapshot{State: Open, Until: now.Add(30 * time.Second)} },
			check: func(t *testing.T, b *Breaker, now time.Time) {
				wantOpenUntil(t, b, now.Add(30*time.Second))
				rejected(t, b)
				time.Sleep(30*time.Second - time.Nanosecond)
				rejected(t, b)
				time.Sleep(2 * time.Nanosecond)
				run(t, b, succeed)
				wantState(t, b, Closed)
			},
		},
		{
			name:   "open until now+30s, probe fails",
			policy: 5,
			snap:   func(now time.Time) Snapshot { return Snapshot{State: Open, Until: now.Add(30 * time.Second)} },
			check: func(t *testing.T, b *Breaker, now time.Time) {
				time.Sleep(31 * time.Second)
				run(t, b, failure)
				wantOpenUntil(t, b, time.Now().Add(cooldown))
				rejected(t, b)
			},
		},
		{
			name:   "open until a past time probes at once",
			policy: 5,
			snap:   func(now time.Time) Snapshot { return Snapshot{State: Open, Until: now.Add(-time.Hour)} },
			check: func(t *testing.T, b *Breaker, now time.Time) {
				run(t, b, succeed)
				wantState(t, b, Closed)
			},
		},
		{
			name:     "closed with 3 of 5 failures",
			policy:   5,
			snap:     func(time.Time) Snapshot { return Snapshot{State: Closed} },
			failures: 3,
			check: func(t *testing.T, b *Breaker, now time.Time) {
				run(t, b, failure)
				wantState(t, b, Closed)
				run(t, b, failure)
				wantOpenUntil(t, b, now.Add(cooldown))
			},
		},
		{
			name:     "empty state with 3 of 5 failures",
			policy:   5,
			snap:     func(time.Time) Snapshot { return Snapshot{} },
			failures: 3,
			check: func(t *testing.T, b *Breaker, now time.Time) {
				run(t, b, throttle)
				run(t, b, failure)
				wantState(t, b, Closed)
				run(t, b, failure)
				wantState(t, b, Open)
			},
		},
		{
			name:     "closed with 3 of 5 failures, then a success",
			policy:   5,
			snap:     func(time.Time) Snapshot { return Snapshot{State: Closed} },
			failures: 3,
			check: func(t *testing.T, b *Breaker, now time.Time) {
				run(t, b, succeed)
				for range 4 {
					run(t, b, failure)
				}
				wantState(t, b, Closed)
				run(t, b, failure)
				wantState(t, b, Open)
			},
		},
		{
			name:     "closed with more failures than the policy opens on the next",
			policy:   2,
			snap:     func(time.Time) Snapshot { return Snapshot{State: Closed} },
			failures: 7,
			check: func(t *testing.T, b *Breaker, now time.Time) {
				wantState(t, b, Closed)
				run(t, b, failure)
				wantState(t, b, Open)
			},
		},
		{
			name:     "failures ignored when open",
			policy:   5,
			snap:     func(now time.Time) Snapshot { return Snapshot{State: Open, Until: now.Add(time.Second)} },
			failures: 4,
			check: func(t *testing.T, b *Breaker, now time.Time) {
				time.Sleep(2 * time.Second)
				run(t, b, succeed)
				for range 4 {
					run(t, b, failure)
				}
				wantState(t, b, Closed)
			},
		},
		{
			name:   "half-open lets one probe through",
			policy: 5,
			snap:   func(time.Time) Snapshot { return Snapshot{State: HalfOpen} },
			check: func(t *testing.T, b *Breaker, now time.Time) {
				wantState(t, b, HalfOpen)
				run(t, b, succeed)
				wantState(t, b, Closed)
			},
		},
		{
			name:   "half-open probe fails",
			policy: 5,
			snap:   func(time.Time) Snapshot { return Snapshot{State: HalfOpen} },
			check: func(t *testing.T, b *Breaker, now time.Time) {
				run(t, b, failure)
				wantOpenUntil(t, b, now.Add(cooldown))
				rejected(t, b)
			},
		},
		{
			name:   "half-open probe throttled",
			policy: 5,
			snap:   func(time.Time) Snapshot { return Snapshot{State: HalfOpen} },
			check: func(t *testing.T, b *Breaker, now time.Time) {
				run(t, b, throttle)
				wantState(t, b, HalfOpen)
				run(t, b, succeed)
				wantState(t, b, Closed)
			},
		},
		{
			name:   "open with the breaker disabled still waits",
			policy: 0,
			snap:   func(now time.Time) Snapshot { return Snapshot{State: Open, Until: now.Add(time.Minute)} },
			check: func(t *testing.T, b *Breaker, now time.Time) {
				rejected(t, b)
				time.Sleep(time.Minute + time.Nanosecond)
				run(t, b, failure) // a failed probe reopens whatever the policy
				wantState(t, b, Open)
				b = newBreaker(t, Policy{Failures: 0, Cooldown: cooldown}, Snapshot{}, 0)
				for range 100 {
					run(t, b, failure)
				}
				wantState(t, b, Closed)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				b := newBreaker(t, Policy{Failures: tc.policy, Cooldown: cooldown}, tc.snap(now), tc.failures)
				tc.check(t, b, now)
			})
		})
	}
}

// TestBreakerSnapshotRoundTrip: a breaker restored from another's Snapshot
// behaves like it.
func TestBreakerSnapshotRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Policy{Failures: 2, Cooldown: time.Minute}
		a := newBreaker(t, p, Snapshot{}, 0)
		run(t, a, failure)
		run(t, a, failure)
		snap := a.Snapshot()
		b := newBreaker(t, p, snap, 0)
		if got := b.Snapshot(); got.State != snap.State || !got.Until.Equal(snap.Until) {
			t.Fatalf("restored Snapshot = %+v, want %+v", got, snap)
		}
		rejected(t, b)
		time.Sleep(time.Minute + time.Nanosecond)
		run(t, b, succeed)
		wantState(t, b, Closed)
	})
}

func TestBreakerForceProbe(t *testing.T) {
	t.Run("open lets the next call through at once", func(t *testing.T) {
		for _, probe := range []outcome{succeed, failure, throttle} {
			t.Run(probe.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newBreaker(t, Policy{Failures: 2, Cooldown: time.Hour}, Snapshot{}, 0)
					run(t, b, failure)
					run(t, b, failure)
					rejected(t, b)
					time.Sleep(time.Minute)
					b.ForceProbe()
					wantState(t, b, HalfOpen)
					run(t, b, probe)
					switch probe {
					case succeed:
						wantState(t, b, Closed)
						run(t, b, failure)
						wantState(t, b, Closed)
					case failure:
						wantOpenUntil(t, b, time.Now().Add(time.Hour))
						rejected(t, b)
					case throttle:
						wantState(t, b, HalfOpen)
						run(t, b, succeed)
						wantState(t, b, Closed)
					}
				})
			})
		}
	})
	t.Run("restored open", func(t *testing.T) {
		b := newBreaker(t, Policy{Failures: 2, Cooldown: time.Hour}, Snapshot{State: Open, Until: time.Now().Add(time.Hour)}, 0)
		rejected(t, b)
		b.ForceProbe()
		run(t, b, succeed)
		wantState(t, b, Closed)
	})
	t.Run("closed is unchanged", func(t *testing.T) {
		b := newBreaker(t, Policy{Failures: 3, Cooldown: time.Hour}, Snapshot{}, 0)
		run(t, b, failure)
		run(t, b, failure)
		b.ForceProbe()
		wantState(t, b, Closed)
		run(t, b, failure) // the two earlier failures still count
		wantState(t, b, Open)
	})
	t.Run("half-open is unchanged", func(t *testing.T) {
		b := newBreaker(t, Policy{Failures: 3, Cooldown: time.Hour}, Snapshot{State: HalfOpen}, 0)
		b.ForceProbe()
		wantState(t, b, HalfOpen)
		run(t, b, failure)
		wantState(t, b, Open)
	})
}

type wrapErr struct{ err error }

func (w wrapErr) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapErr) Unwrap() error { return w.err }

func TestBreakerDoReturnsFnError(t *testing.T) {
	wrapped := fmt.Errorf("GET https://example.com: %w", errBoom)
	custom := wrapErr{errBoom}
	ctxWrapped := fmt.Errorf("poll interrupted: %w", Exclude(context.Canceled))
	tests := []struct {
		name     string
		ret      error
		want     error // compared with ==, unless nil-ness only
		is       []error
		msg      string
		counts   bool // whether it is a failure for the breaker
		excluded bool
	}{
		{name: "nil", ret: nil, want: nil},
		{name: "plain", ret: errBoom, want: errBoom, is: []error{errBoom}, msg: "boom", counts: true},
		{name: "wrapped", ret: wrapped, want: wrapped, is: []error{errBoom}, msg: wrapped.Error(), counts: true},
		{name: "custom type", ret: custom, want: custom, is: []error{errBoom}, msg: "wrapped: boom", counts: true},
		{name: "excluded", ret: Exclude(errThrottle), want: errThrottle, is: []error{errThrottle}, msg: errThrottle.Error(), excluded: true},
		{name: "excluded twice", ret: Exclude(Exclude(errThrottle)), want: errThrottle, is: []error{errThrottle}, msg: errThrottle.Error(), excluded: true},
		{name: "excluded deadline", ret: Exclude(context.DeadlineExceeded), want: context.DeadlineExceeded, is: []error{context.DeadlineExceeded}, msg: "context deadline exceeded", excluded: true},
		{name: "excluded wrapped", ret: Exclude(wrapped), want: wrapped, is: []error{errBoom}, msg: wrapped.Error(), excluded: true},
		{name: "wraps an excluded one", ret: ctxWrapped, want: ctxWrapped, is: []error{context.Canceled}, msg: "poll interrupted: context canceled", excluded: true},
		{name: "Exclude(nil) is a success", ret: Exclude(nil), want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBreaker(t, Policy{Failures: 1, Cooldown: time.Hour}, Snapshot{}, 0)
			calls := 0
			got := b.Do(func() error { calls++; return tc.ret })
			if calls != 1 {
				t.Fatalf("fn called %d times", calls)
			}
			if got != tc.want {
				t.Fatalf("Do = %#v, want %#v", got, tc.want)
			}
			for _, target := range tc.is {
				if !errors.Is(got, target) {
					t.Fatalf("errors.Is(%v, %v) = false", got, target)
				}
			}
			if got != nil && got.Error() != tc.msg {
				t.Fatalf("Do error text = %q, want %q", got.Error(), tc.msg)
			}
			if errors.Is(got, ErrOpen) {
				t.Fatalf("Do = %v: matches ErrOpen", got)
			}
			if _, ok := got.(excluded); ok {
				t.Fatalf("Do = %#v: still wrapped by Exclude", got)
			}
			// Failures: 1, so the state tells how the result counted.
			switch s := b.Snapshot().State; {
			case tc.counts && s != Open:
				t.Fatalf("after %v: state %q, want open", tc.ret, s)
			case !tc.counts && s != Closed:
				t.Fatalf("after %v: state %q, want closed", tc.ret, s)
			}
			if tc.excluded {
				// Not a success either: in half-open it stays half-open.
				h := newBreaker(t, Policy{Failures: 1, Cooldown: time.Hour}, Snapshot{State: HalfOpen}, 0)
				if err := h.Do(func() error { return tc.ret }); err != tc.want {
					t.Fatalf("half-open Do = %v, want %v", err, tc.want)
				}
				wantState(t, h, HalfOpen)
			}
		})
	}
}

func TestExcludeNil(t *testing.T) {
	if err := Exclude(nil); err != nil {
		t.Fatalf("Exclude(nil) = %#v, want nil", err)
	}
}

// inFlight starts b.Do in a goroutine with an fn that blocks until release
// is closed and then returns o's error. It returns once fn is running.
func inFlight(t *testing.T, b *Breaker, o outcome) (release chan struct{}, done chan error) {
	t.Helper()
	entered := make(chan struct{})
	release = make(chan struct{})
	done = make(chan error, 1)
	go func() {
		done <- b.Do(func() error {
			close(entered)
			<-release
			return o.err()
		})
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("first call did not run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("first call did not start")
	}
	return release, done
}

func await(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10s", what)
	}
	return nil
}

// TestBreakerConcurrentProbe: while the half-open probe is in flight a
// second call is rejected at once, without calling fn. These tests run on
// the real clock (no sleeping): a goroutine blocked on a mutex is not
// durably blocked, so a synctest bubble could hang instead of failing.
func TestBreakerConcurrentProbe(t *testing.T) {
	setups := []struct {
		name  string
		setup func(t *testing.T) *Breaker
	}{
		{"restored half-open", func(t *testing.T) *Breaker {
			return newBreaker(t, Policy{Failures: 2, Cooldown: time.Hour}, Snapshot{State: HalfOpen}, 0)
		}},
		{"open past its cooldown", func(t *testing.T) *Breaker {
			return newBreaker(t, Policy{Failures: 2, Cooldown: time.Hour}, Snapshot{State: Open, Until: time.Now().Add(-time.Second)}, 0)
		}},
		{"forced probe", func(t *testing.T) *Breaker {
			b := newBreaker(t, Policy{Failures: 2, Cooldown: time.Hour}, Snapshot{}, 0)
			run(t, b, failure)
			run(t, b, failure)
			b.ForceProbe()
			return b
		}},
	}
	for _, s := range setups {
		for _, probe := range []outcome{succeed, failure, throttle} {
			t.Run(s.name+"/"+probe.String(), func(t *testing.T) {
				b := s.setup(t)
				release, done := inFlight(t, b, probe)

				second := make(chan error, 1)
				var called bool
				go func() { second <- b.Do(func() error { called = true; return nil }) }()
				err := await(t, second, "second call during the probe")
				if called || err != ErrOpen {
					t.Fatalf("second call during the probe: called=%v err=%v, want rejected with ErrOpen", called, err)
				}
				close(release)
				if err := await(t, done, "probe"); err != probe.want() {
					t.Fatalf("probe Do = %v, want %v", err, probe.want())
				}
				switch probe {
				case succeed:
					wantState(t, b, Closed)
					run(t, b, succeed)
				case failure:
					wantState(t, b, Open)
					rejected(t, b)
				case throttle:
					wantState(t, b, HalfOpen)
					run(t, b, succeed)
					wantState(t, b, Closed)
				}
			})
		}
	}
}

// TestBreakerConcurrentClosed: in the closed state a second call waits for
// the one in flight and then runs on the state that call left behind (no
// lost update).
func TestBreakerConcurrentClosed(t *testing.T) {
	for _, first := range []outcome{failure, succeed} {
		t.Run(first.String(), func(t *testing.T) {
			b := newBreaker(t, Policy{Failures: 2, Cooldown: time.Hour}, Snapshot{}, 0)
			release, done := inFlight(t, b, first)

			second := make(chan error, 1)
			started := make(chan struct{})
			go func() {
				close(started)
				second <- b.Do(func() error { return errBoom })
			}()
			<-started
			// Let the second call get as far as it can before the first
			// ends (no sleep: spin on the scheduler for a moment).
			for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline); {
				runtime.Gosched()
			}
			select {
			case err := <-second:
				t.Fatalf("second call returned %v while the first was in flight", err)
			default:
			}
			close(release)
			if err := await(t, done, "first call"); err != first.want() {
				t.Fatalf("first Do = %v, want %v", err, first.want())
			}
			if err := await(t, second, "second call"); err != errBoom {
				t.Fatalf("second Do = %v, want %v", err, errBoom)
			}
			// failure + failure = 2: open (a lost update leaves 1);
			// success + failure = 1: closed.
			want := map[outcome]string{failure: Open, succeed: Closed}[first]
			wantState(t, b, want)
		})
	}
}

func TestBreakerPanicInFn(t *testing.T) {
	b := newBreaker(t, Policy{Failures: 2, Cooldown: time.Hour}, Snapshot{}, 0)
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = b.Do(func() error { panic("kaboom") })
	}()
	// The breaker is not left locked.
	done := make(chan error, 1)
	go func() { done <- b.Do(func() error { return nil }) }()
	if err := await(t, done, "Do after a panic"); err != nil {
		t.Fatalf("Do after a panic = %v", err)
	}
	probe := make(chan error, 1)
	go func() { b.ForceProbe(); probe <- nil }()
	await(t, probe, "ForceProbe after a panic")
}

// TestBreakerConcurrentUse is for the race detector.
func TestBreakerConcurrentUse(t *testing.T) {
	b := newBreaker(t, Policy{Failures: 3, Cooldown: time.Millisecond}, Snapshot{}, 0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				switch (i + j) % 7 {
				case 0, 1:
					b.ForceProbe()
				case 2:
					_ = b.Snapshot()
				default:
					err := b.Do(func() error { return outcome((i * j) % 4).err() })
					if errors.Is(err, ErrOpen) {
						continue
					}
				}
			}
		})
	}
	wg.Wait()
	b.ForceProbe() // whatever state it was left in, the next call goes through
	run(t, b, succeed)
	wantState(t, b, Closed)
}
