// Package breaker holds pacer's failure policies: exponential backoff
// (Backoff), Retry-After parsing and a per-source circuit breaker whose
// state can be persisted and restored.
//
// Everything here is independent of scheduling: the scheduler asks when the
// next attempt may be made and reports what happened.
package breaker

import (
	"errors"
	"math"
	"sync"
	"time"
)

// Breaker states, as shown in status and persisted.
const (
	Closed   = "closed"
	Open     = "open"
	HalfOpen = "half-open"
)

// ErrOpen is returned by Do when the breaker rejects the call.
var ErrOpen = errors.New("circuit breaker is open")

// Policy configures a breaker (config.Breaker is this type). Failures == 0
// disables it: it never opens on its own.
type Policy struct {
	Failures int           // consecutive failures that open the breaker
	Cooldown time.Duration // how long it stays open before a probe
}

// Snapshot is the persistable state of a breaker.
type Snapshot struct {
	State string    // Closed, Open or HalfOpen ("" is Closed)
	Until time.Time // when an Open breaker's cooldown ends (see ProbeAt)
}

// ProbeAt is the first instant at which a breaker open until until lets
// its probe through: strictly after until, as gobreaker's
// expiry.Before(now). It is the one statement of the half-open boundary:
// the breaker admits by it (Breaker.DoAt), the state shown is half-open by
// it (Snapshot.StateAt) and the scheduler sets the probe's poll at it, so
// that the three agree to the nanosecond.
func ProbeAt(until time.Time) time.Time { return until.Add(time.Nanosecond) }

// StateAt is the state of s at now: an Open snapshot whose cooldown has
// passed (ProbeAt) is HalfOpen, its next call the probe; a state it does
// not know ("" included) is Closed.
func (s Snapshot) StateAt(now time.Time) string {
	switch s.State {
	case Open:
		if now.Before(ProbeAt(s.Until)) {
			return Open
		}
		return HalfOpen
	case HalfOpen:
		return HalfOpen
	}
	return Closed
}

// Exclude marks err as neither success nor failure for the breaker
// (throttling, shutdown cancellation): Do returns err unchanged otherwise.
func Exclude(err error) error {
	if err == nil {
		return nil
	}
	return excluded{err}
}

type excluded struct{ error }

func (e excluded) Unwrap() error { return e.error }

// Breaker is one source's circuit breaker, with the semantics of
// github.com/sony/gobreaker/v2's CircuitBreaker (MaxRequests 1, Interval 0):
// closed, it counts consecutive failures and opens at Policy.Failures; open,
// it rejects every call until its cooldown has passed (strictly after
// Until); then, half-open, it lets one probe through, which closes it on
// success and opens it for another cooldown on failure. Excluded errors
// count as neither. gobreaker offers no way to build a breaker in a given
// state (open until a stored time, or with failures already counted), which
// a restart needs, so the state is this small struct instead.
//
// It is safe for concurrent use, but a source has at most one call in
// flight: Do holds the call lock for the duration of the call. A call made
// while another is in flight waits for it when the breaker is closed and is
// rejected at once otherwise (half-open lets exactly one probe through).
type Breaker struct {
	threshold uint32
	cooldown  time.Duration

	call sync.Mutex // held by Do during a call, and by ForceProbe
	mu   sync.Mutex // guards the fields below
	// state is Closed, Open or HalfOpen; failures counts the consecutive
	// failures while closed; until is when an open breaker lets a probe
	// through.
	state    string
	failures uint32
	until    time.Time
}

// New returns a breaker restored to snap, with failures consecutive
// failures already counted (only meaningful while closed). A state it does
// not know ("" included) is Closed.
func New(p Policy, snap Snapshot, failures int) *Breaker {
	b := &Breaker{threshold: clampUint32(p.Failures), cooldown: p.Cooldown, state: Closed}
	if b.cooldown <= 0 {
		b.cooldown = time.Minute
	}
	switch snap.State {
	case Open:
		b.state, b.until = Open, snap.Until
	case HalfOpen:
		b.state = HalfOpen
	default:
		b.failures = clampUint32(failures)
	}
	return b
}

// Do is DoAt on the real clock (time.Now).
func (b *Breaker) Do(fn func() error) error { return b.DoAt(time.Now, fn) }

// DoAt calls fn unless the breaker rejects it, in which case it returns
// ErrOpen without calling fn. fn's error is returned as is, unwrapped from
// Exclude. A panic in fn counts as a failure and is passed on. The breaker
// keeps no clock: it reads the time from the caller's now, when the call
// is admitted and when it ends (a cooldown starts then), so that a
// scheduler's cooldowns are read on its injected clock, as x/time/rate's
// AllowN(t, n) takes its time from the caller.
func (b *Breaker) DoAt(now func() time.Time, fn func() error) error {
	if !b.call.TryLock() {
		// A call is in flight. Only a closed breaker queues behind it; an
		// open or half-open one lets exactly one probe through.
		if b.Snapshot().State != Closed {
			return ErrOpen
		}
		b.call.Lock()
	}
	defer b.call.Unlock()
	if !b.admit(now()) {
		return ErrOpen
	}
	ended := false
	defer func() {
		if !ended {
			b.record(errPanic, now())
		}
	}()
	err := fn()
	ended = true
	b.record(err, now())
	// Strip the Exclude wrapper itself; an error that merely wraps an
	// excluded one is returned as is, with its context.
	for {
		x, ok := err.(excluded)
		if !ok {
			return err
		}
		err = x.error
	}
}

// errPanic is what a call that panicked counts as.
var errPanic = errors.New("breaker: call panicked")

// admit reports whether a call may be made at now, moving an open breaker
// whose cooldown has passed to half-open. The call lock is held.
func (b *Breaker) admit(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open {
		if now.Before(ProbeAt(b.until)) {
			return false
		}
		b.state, b.until = HalfOpen, time.Time{}
	}
	return true
}

// record applies the result of a call that ended at now. The call lock is
// held.
func (b *Breaker) record(err error, now time.Time) {
	var x excluded
	if errors.As(err, &x) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		b.state, b.failures = Closed, 0
	case b.state == HalfOpen:
		b.open(now)
	default:
		if b.failures < math.MaxUint32 {
			b.failures++
		}
		if b.threshold > 0 && b.failures >= b.threshold {
			b.open(now)
		}
	}
}

// open opens the breaker for a cooldown from now. mu held.
func (b *Breaker) open(now time.Time) {
	b.state, b.failures, b.until = Open, 0, now.Add(b.cooldown)
}

// Snapshot returns the current state. An Open breaker whose cooldown has
// passed is reported as Open still; callers read it at their clock's time
// (Snapshot.StateAt).
func (b *Breaker) Snapshot() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open {
		return Snapshot{State: Open, Until: b.until}
	}
	return Snapshot{State: b.state}
}

// ForceProbe moves an Open breaker to half-open now, so that the next call
// goes through as its probe (an operator's trigger). It does nothing to a
// closed or half-open breaker. It waits for a call in flight.
func (b *Breaker) ForceProbe() {
	b.call.Lock()
	defer b.call.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open {
		b.state, b.until = HalfOpen, time.Time{}
	}
}

// clampUint32 converts n to the failure counter's type: negative is 0 and
// anything above math.MaxUint32 is math.MaxUint32 (never wraps around).
func clampUint32(n int) uint32 {
	switch {
	case n <= 0:
		return 0
	case uint64(n) > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}
