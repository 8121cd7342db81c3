// Package lifecycle stops goroutines by cancel-then-wait with a deadline:
// a Stage's goroutines share a context, and StopBy cancels it, then waits
// for them until a given clock reaches a time, so that a shutdown whose
// goroutines do not end in time goes on without them. The clock is the
// caller's (the scheduler's injected one, the notifier's), so that tests
// on a fake clock see the same deadlines as the daemon.
package lifecycle

import (
	"context"
	"github.com/pacer-dev/pacer/internal/clock"
	"sync"
	"time"
)

// Stage is a set of goroutines that stop together: StopBy cancels their
// context, then waits for them. The zero Stage is ready for Begin.
type Stage struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Begin gives the stage its context and returns it; call it once, before
// Spawn.
func (g *Stage) Begin() context.Context {
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g.ctx
}

// Spawn runs f in a goroutine of the stage; f ends when the stage's
// context is done.
func (g *Stage) Spawn(f func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
}

// StopBy cancels the stage's context and waits for its goroutines until c
// reaches t; it reports whether every goroutine ended. A stage never begun
// has none: true.
func (g *Stage) StopBy(c clock.Clock, t time.Time) bool {
	if g.cancel == nil {
		return true
	}
	g.cancel()
	return WaitBy(c, &g.wg, t)
}

// WaitBy waits for wg until c reaches t; it reports whether wg's count
// reached zero. The goroutine that waits for wg ends with it.
func WaitBy(c clock.Clock, wg *sync.WaitGroup, t time.Time) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return AwaitBy(c, done, t)
}

// AwaitBy waits for done until c reaches t; it reports whether done was
// closed (done wins a tie with the deadline).
func AwaitBy(c clock.Clock, done <-chan struct{}, t time.Time) bool {
	select {
	case <-done:
		return true
	default:
	}
	tm := c.NewTimer(max(t.Sub(c.Now()), 0))
	defer tm.Stop()
	select {
	case <-done:
		return true
	case <-tm.C():
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}
