// Package breaker holds pacer's failure policies: exponential backoff
// (Backoff), Retry-After parsing and a per-source circuit breaker built on
// github.com/sony/gobreaker/v2 whose state can be persisted and restored.
//
// Everything here is independent of scheduling: the scheduler asks when the
// next attempt may be made and reports what happened.
package breaker

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Breaker states, as shown in status and persisted.
const (
	Closed   = "closed"
	Open     = "open"
	HalfOpen = "half-open"
)

// ErrOpen is returned by Do when the breaker rejects the call.
var ErrOpen = errors.New("circuit breaker is open")

// Policy configures a breaker. Failures == 0 disables it: it never opens.
type Policy struct {
	Failures int           // consecutive failures that open the breaker
	Cooldown time.Duration // how long it stays open before a probe
}

// Snapshot is the persistable state of a breaker.
type Snapshot struct {
	State string    // Closed, Open or HalfOpen ("" is Closed)
	Until time.Time // when an Open breaker lets a probe through
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

// Breaker is one source's circuit breaker. It wraps a gobreaker
// DistributedCircuitBreaker whose shared state lives in memory, so that the
// state can be exported (Snapshot) for the store and injected back at start.
// It is safe for concurrent use, but a source has at most one call in
// flight; Do holds the breaker's mutex for the duration of the call. A call
// made while another is in flight waits for it when the breaker is closed and
// is rejected at once otherwise (half-open lets exactly one probe through).
type Breaker struct {
	dcb  *gobreaker.DistributedCircuitBreaker[struct{}]
	data *memData
}

// New returns a breaker restored to snap, with failures consecutive
// failures already counted (only meaningful while closed).
func New(name string, p Policy, snap Snapshot, failures int) (*Breaker, error) {
	d := &memData{}
	if err := d.put(restoreState(snap, failures)); err != nil {
		return nil, fmt.Errorf("breaker %s: %w", name, err)
	}
	threshold := clampUint32(p.Failures)
	cooldown := p.Cooldown
	if cooldown <= 0 {
		cooldown = time.Minute
	}
	dcb, err := gobreaker.NewDistributedCircuitBreaker[struct{}](d, gobreaker.Settings{
		Name:        name,
		MaxRequests: 1,
		Timeout:     cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return threshold > 0 && c.ConsecutiveFailures >= threshold
		},
		IsExcluded: func(err error) bool {
			var x excluded
			return errors.As(err, &x)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("breaker %s: %w", name, err)
	}
	return &Breaker{dcb: dcb, data: d}, nil
}

// Do calls fn unless the breaker rejects it, in which case it returns
// ErrOpen without calling fn. fn's error is returned as is, unwrapped from
// Exclude.
func (b *Breaker) Do(fn func() error) error {
	// The call lock is taken here, not by gobreaker: its
	// DistributedCircuitBreaker.Execute reads the shared state before it
	// takes the store lock, so a call that waited for another would run
	// on (and then write back) the state from before that call.
	if !b.data.lock.TryLock() {
		// A call is in flight. Only a closed breaker queues behind it; an
		// open or half-open one lets exactly one probe through.
		if b.Snapshot().State != Closed {
			return ErrOpen
		}
		b.data.lock.Lock()
	}
	defer b.data.lock.Unlock()
	_, err := b.dcb.Execute(func() (struct{}, error) { return struct{}{}, fn() })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return ErrOpen
	}
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

// Snapshot returns the current state. An Open breaker whose Until has passed
// is reported as Open still; callers compare Until with their clock.
func (b *Breaker) Snapshot() Snapshot {
	s, err := b.data.get()
	if err != nil {
		return Snapshot{State: Closed}
	}
	switch s.State {
	case gobreaker.StateOpen:
		return Snapshot{State: Open, Until: s.Expiry}
	case gobreaker.StateHalfOpen:
		return Snapshot{State: HalfOpen}
	}
	return Snapshot{State: Closed}
}

// ForceProbe moves an Open breaker to half-open now, so that the next call
// goes through as its probe (an operator's trigger). It does nothing to a
// closed breaker.
func (b *Breaker) ForceProbe() {
	b.data.update(func(s *gobreaker.SharedState) {
		if s.State == gobreaker.StateOpen {
			s.State = gobreaker.StateHalfOpen
			s.Generation++
			s.Counts = gobreaker.Counts{}
			s.Buckets = []gobreaker.Counts{{}}
			s.Expiry = time.Time{}
		}
	})
}

// Reset closes the breaker and forgets every counted failure.
func (b *Breaker) Reset() {
	b.data.update(func(s *gobreaker.SharedState) {
		*s = restoreState(Snapshot{State: Closed}, 0)
		s.Generation++
	})
}

// restoreState builds the shared state of a breaker in snap with failures
// consecutive failures counted. gobreaker (Interval 0) keeps its counts in
// one bucket besides the totals; a state without that bucket makes its
// Execute index an empty slice and panic.
func restoreState(snap Snapshot, failures int) gobreaker.SharedState {
	s := gobreaker.SharedState{State: gobreaker.StateClosed, Generation: 1}
	switch snap.State {
	case Open:
		s.State = gobreaker.StateOpen
		s.Expiry = snap.Until
	case HalfOpen:
		s.State = gobreaker.StateHalfOpen
	default:
		// Leave room for the next failure: gobreaker's counter wraps.
		if f := min(clampUint32(failures), math.MaxUint32-1); f > 0 {
			s.Counts = gobreaker.Counts{Requests: f, TotalFailures: f, ConsecutiveFailures: f}
		}
	}
	s.Buckets = []gobreaker.Counts{s.Counts}
	return s
}

// clampUint32 converts n to gobreaker's counter type: negative is 0 and
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

// memData is the gobreaker.SharedDataStore of one breaker: an in-process
// mutex and the JSON-encoded state. No database lock is ever held by a poll.
type memData struct {
	lock  sync.Mutex // the call lock: held by Do during a call and by update
	mu    sync.Mutex // guards state
	state []byte
}

var _ gobreaker.SharedDataStore = (*memData)(nil)

// Lock and Unlock are gobreaker's "distributed" lock. They do nothing: every
// use of the DistributedCircuitBreaker (Do) already holds d.lock around the
// whole Execute, including the state read gobreaker makes before locking.
// (New uses it alone, before the Breaker is shared.)
func (d *memData) Lock(string) error   { return nil }
func (d *memData) Unlock(string) error { return nil }

func (d *memData) GetData(string) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state, nil
}

func (d *memData) SetData(_ string, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state = data
	return nil
}

func (d *memData) get() (gobreaker.SharedState, error) {
	var s gobreaker.SharedState
	data, _ := d.GetData("")
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("decode breaker state: %w", err)
	}
	return s, nil
}

func (d *memData) put(s gobreaker.SharedState) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode breaker state: %w", err)
	}
	return d.SetData("", data)
}

// update changes the state under the breaker's call lock, so that it never
// races with a call in flight.
func (d *memData) update(f func(*gobreaker.SharedState)) {
	d.lock.Lock()
	defer d.lock.Unlock()
	s, err := d.get()
	if err != nil {
		s = restoreState(Snapshot{}, 0)
	}
	f(&s)
	_ = d.put(s) // encoding a SharedState cannot fail
}
