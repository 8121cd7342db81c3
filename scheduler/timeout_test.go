package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"
)

// done waits (a generous real bound) for ctx to be done.
func done(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not done after 10 s")
	}
}

// TestPollTimeouts: a poll's context reports its deadline, is done with
// context.DeadlineExceeded (as a context.WithTimeout's) once its timeout
// passes and with Canceled when the worker's parent is canceled; a poll
// after a timeout gets a fresh context, and one ended in time leaves the
// next poll's untouched.
func TestPollTimeouts(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	tm := newPollTimeouts(parent, RealClock{})
	defer tm.close()

	before := time.Now()
	ctx := tm.start(time.Millisecond)
	if dl, ok := ctx.Deadline(); !ok || dl.Before(before.Add(time.Millisecond)) {
		t.Errorf("Deadline = %v, %v; want one at least 1 ms after start", dl, ok)
	}
	done(t, ctx)
	if err := ctx.Err(); err != context.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timed out: Err = %v, want %v", err, context.DeadlineExceeded)
	}
	if c := context.Cause(ctx); c != context.DeadlineExceeded {
		t.Errorf("timed out: Cause = %v, want %v", c, context.DeadlineExceeded)
	}
	// A request's own context derived from it (as net/http makes) is done too.
	child, stopChild := context.WithCancel(ctx)
	done(t, child)
	stopChild()
	tm.stop()

	next := tm.start(time.Hour)
	if err := next.Err(); err != nil {
		t.Fatalf("after a timeout, the next poll's Err = %v, want nil", err)
	}
	tm.stop()

	// Many polls ended before their timeouts: none is done, and the one
	// after them is not canceled by any earlier timer.
	for i := range 500 {
		c := tm.start(time.Duration(i%3) * time.Hour)
		if i%3 != 0 && c.Err() != nil {
			t.Fatalf("poll %d: Err = %v at start", i, c.Err())
		}
		tm.stop()
	}
	last := tm.start(time.Hour)
	if err := last.Err(); err != nil {
		t.Fatalf("after polls ended in time: Err = %v, want nil", err)
	}
	cancel()
	done(t, last)
	if err := last.Err(); err != context.Canceled {
		t.Errorf("parent canceled: Err = %v, want %v", err, context.Canceled)
	}
	tm.stop()
	if err := tm.start(time.Hour).Err(); err != context.Canceled {
		t.Errorf("after the parent was canceled: Err = %v, want %v", err, context.Canceled)
	}
	tm.stop()
}
