package scheduler

import (
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// The polls in flight, as the shutdown sees them: a claimed poll is in the
// queue's claimed list (queue.Queue.Claim) until its finish, so that a shutdown whose
// cancelled polls do not end in their grace can still record each of them
// as interrupted (contract rule 3.10: the polls cut off by SIGTERM are
// recorded as interrupted), instead of leaving them as a crash would.

// abandonedError is the error of the record of a poll that a shutdown
// recorded as interrupted without its end.
const abandonedError = "shutdown: the poll did not end after its cancellation"

// abandonPolls records every claimed poll that has not finished as
// interrupted at now, as its finish would have after its cancellation
// (an interrupted poll counts for nothing and leaves its source due from
// its start), and marks it so that its finish, should it still come, does
// nothing. It returns how many. Called by the shutdown once the polls'
// grace is over. mu held.
func (w *workers) abandonPolls(now time.Time) int {
	polls := w.q.Abandon()
	for _, a := range polls {
		e := a.Source
		o := policy.Outcome{Kind: domain.OutcomeInterrupted, Start: a.ClaimedAt.Truncate(time.Microsecond),
			End: now.Truncate(time.Microsecond), Err: abandonedError, Brk: breaker.Snapshot{State: breaker.Closed}}
		if e.brk != nil {
			o.Brk = e.brk.Snapshot()
		}
		w.m.poll(o.Kind).Inc()
		rec := &domain.PollRecord{Source: e.name, StartedAt: o.Start.UTC(), DurationMs: now.Sub(a.ClaimedAt).Milliseconds(),
			Outcome: o.Kind, Error: o.Err}
		w.q.Idle(&e.slot)
		var evs []domain.Event
		if a.Gen == e.gen {
			evs = w.applyPoll(e, e.brk, o)
		}
		w.save(e, rec, evs...)
	}
	return len(polls)
}
