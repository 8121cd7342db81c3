package queue

import (
	"context"
	"sync"
)

// semaphore is a counting semaphore whose capacity may change while places
// are held (a host's learned concurrency, contract 13.5). Capacity 0 means
// no cap: every acquire succeeds at once (the count is still kept, for the
// in-flight figures). One lock guards it; a waiter sleeps on a channel
// closed by the next release or resize, so only its group's one admitter
// ever waits on it.
type semaphore struct {
	mu   sync.Mutex
	n    int // places held
	cap  int // 0: none
	wake chan struct{}
	// waiting: someone sleeps on wake, so the next release or resize
	// must close it (and make a new one); otherwise they leave it be,
	// so that a release allocates nothing.
	waiting bool
}

func newSemaphore(capacity int) *semaphore {
	return &semaphore{cap: max(capacity, 0)}
}

// acquire takes a place, waiting while all are held; held is the number
// held with it, waited whether it had to wait. ok is false if ctx ended.
func (s *semaphore) acquire(ctx context.Context) (held int, waited, ok bool) {
	for {
		s.mu.Lock()
		if s.cap == 0 || s.n < s.cap {
			s.n++
			held = s.n
			s.mu.Unlock()
			return held, waited, true
		}
		if s.wake == nil {
			s.wake = make(chan struct{}) // made at the first wait: most groups never wait
		}
		ch := s.wake
		s.waiting = true
		s.mu.Unlock()
		waited = true
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, waited, false
		}
	}
}

// tryAcquire takes a place if one is free now, without waiting.
func (s *semaphore) tryAcquire() (held int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cap != 0 && s.n >= s.cap {
		return 0, false
	}
	s.n++
	return s.n, true
}

// release gives a place back and wakes the waiter.
func (s *semaphore) release() {
	s.mu.Lock()
	s.n--
	s.signal()
	s.mu.Unlock()
}

// resize sets the capacity (0: none) and wakes the waiter.
func (s *semaphore) resize(capacity int) {
	s.mu.Lock()
	s.cap = max(capacity, 0)
	s.signal()
	s.mu.Unlock()
}

// signal wakes whoever waits now. s.mu held.
func (s *semaphore) signal() {
	if !s.waiting {
		return
	}
	close(s.wake)
	s.wake, s.waiting = make(chan struct{}), false
}

func (s *semaphore) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *semaphore) capacity() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cap
}
