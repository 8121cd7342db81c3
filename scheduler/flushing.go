package scheduler

import (
	"time"

	"github.com/pacer-dev/pacer/scheduler/flush"
)

// newFlusher is the scheduler's writer (package flush): it commits through
// fenced, a member's fenced committer (setupCluster), or straight to the
// store on a single daemon, and reports to the scheduler's metrics and to
// opts' notification callbacks. Sources whose rows a fenced commit refused
// have lost their shard (rejected).
func (s *Scheduler) newFlusher(opts Options, fenced flush.Committer) *flush.Flusher {
	commit := fenced
	if commit == nil {
		commit = flush.Unfenced(s.store)
	}
	return flush.New(flush.Options{
		Committer:     commit,
		Logger:        s.log,
		Clock:         flushClock{s.clock},
		Keep:          func() int { return int(s.keep.Load()) },
		ObserveCommit: func(took time.Duration) { s.m.storeCommit.Observe(took.Seconds()) },
		CountError:    s.m.storeErrors.Inc,
		OnEvents:      opts.EventsCommitted,
		OnDropEvents:  opts.EventsDropped,
		OnRejected:    s.rejected,
	})
}

// flushClock is the scheduler's Clock as the flusher's (the two Timer
// interfaces are distinct types).
type flushClock struct{ Clock }

// NewTimer returns the scheduler clock's timer.
func (c flushClock) NewTimer(d time.Duration) flush.Timer { return c.Clock.NewTimer(d) }

var _ flush.Clock = flushClock{}
