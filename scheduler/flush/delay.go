package flush

import (
	"cmp"
	"context"
	"sync/atomic"
	"time"
)

// How long the flusher gathers changes before a commit: flushDelay at rest,
// up to loadedDelay under load, back to flushDelay when a poll or a command
// waits for a pending state (rule 3.8 bounds all of it).

// flushDelay is how long a change waits, from its submission, for others
// to share its commit, so that many sources' writes share one transaction.
// With the commit itself this keeps rule 3.8's 250 ms: the flusher commits
// at the oldest pending change's submission plus the delay (or at once, if
// a commit in progress took longer than that).
const flushDelay = 50 * time.Millisecond

// loadedDelay is flushDelay under load, when the last commit wrote at least
// loadedBatch states (at 100,000 sources a minute, 83 states per 50 ms): the
// fixed cost of a commit (begin, a statement per table and row-count step,
// the WAL's commit frame, two wake-ups) is then shared by three times the
// states. It leaves 100 ms of rule 3.8's 250 ms for the commit, which at
// that load writes ~250 states in a few milliseconds; at higher rates the
// delay shrinks so that delay and commit stay within loadedBudget (see
// adapt). A lighter load (a
// daemon of a few sources, the tests) keeps flushDelay: each change there
// costs one commit whatever the delay, and an operator's command or a
// source's next poll waits for it. The load falls back below loadedBatch
// only at a third of the rate that raised it, so the delay does not flap.
// A poll due while its source's state waits for the commit (a source polled
// more often than loadedDelay), or an operator's command waiting for one,
// hurries the commit back to flushDelay (see Flusher.Pending).
const (
	loadedDelay  = 150 * time.Millisecond
	loadedBatch  = 64
	loadedBudget = 150 * time.Millisecond
)

// MemberLoadedBatch is loadedBatch for a cluster member (Options.LoadedBatch):
// PostgreSQL spends ~0.8 ms of its CPU on a commit whatever its size and
// serves every member, so a member gathers 150 ms as soon as its commits
// carry two states. At 67 polls a second (100,000 sources on "@every 5m"
// over 5 members) a 50 ms gathering made commits of 2-3 polls, 70 % of the
// server's CPU (BENCHMARKS.md, issue 25 target 6); a threshold of 8 was
// never reached there. Rule 3.8 is kept as at loadedBatch: loadedBudget
// bounds the delay with the commit, and a waiting poll or command hurries
// it.
const MemberLoadedBatch = 2

// pace is the adaptive delay before a commit: its length after the size of
// the last commit, and the signal of a waiter that hurries it.
type pace struct {
	// batch is the commit size from which the delay grows (loadedBatch,
	// or Options.LoadedBatch).
	batch int
	// delay is the current flushDelay or loadedDelay, after the size of
	// the last commit (flush sets it; Run reads it).
	delay atomic.Int64
	// hurry tells Run that a poll (or an operator's command) waits for a
	// pending state: the commit then waits flushDelay, not loadedDelay.
	hurry chan struct{}
}

// init sets p to flushDelay, nobody hurrying.
func (p *pace) init(batch int) {
	p.batch = cmp.Or(batch, loadedBatch)
	p.hurry = make(chan struct{}, 1)
	p.delay.Store(int64(flushDelay))
}

// hurryUp asks Run to commit what is pending at flushDelay after the oldest
// change instead of loadedDelay.
func (p *pace) hurryUp() {
	select {
	case p.hurry <- struct{}{}:
	default:
	}
}

// adapt sets the delay of the next commit after this one, of n states,
// which took took (more: a backlog is left). A small commit, or a backlog,
// gets flushDelay. A large one gets the longest delay in [flushDelay,
// loadedDelay] whose commit, expected to take took scaled by the ratio of
// the delays (it gathers that many more states), still ends within
// loadedBudget of its oldest change: rule 3.8's 250 ms with 100 ms to
// spare, however fast the states come.
func (p *pace) adapt(n int, more bool, took time.Duration) {
	if n < p.batch || more {
		p.delay.Store(int64(flushDelay))
		return
	}
	next := time.Duration(float64(loadedBudget) / (1 + took.Seconds()/p.current().Seconds()))
	p.delay.Store(int64(min(max(next, flushDelay), loadedDelay)))
}

// current is the delay after the last commit's size.
func (p *pace) current() time.Duration {
	return time.Duration(p.delay.Load())
}

// pause waits until the oldest pending change is the current delay old, or
// flushDelay old once a waiter hurries the commit; it reports false if ctx
// ended first.
func (f *Flusher) pause(ctx context.Context) bool {
	select {
	case <-f.pace.hurry: // a waiter came during the last commit
		return f.pauseFor(ctx, flushDelay, nil)
	default:
	}
	return f.pauseFor(ctx, f.pace.current(), f.pace.hurry)
}

// pauseFor waits until the oldest pending change is delay old, or ctx is
// done (false); a signal on hurry shortens delay to flushDelay.
func (f *Flusher) pauseFor(ctx context.Context, delay time.Duration, hurry <-chan struct{}) bool {
	d := f.wait(delay)
	if d <= 0 {
		return true
	}
	t := f.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	case <-hurry:
		t.Stop()
		return f.pauseFor(ctx, flushDelay, nil)
	}
}

// wait returns how long the next commit waits: until the oldest pending
// change is delay old (0 if it is already, or if nothing is pending).
func (f *Flusher) wait(delay time.Duration) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.book.head == len(f.book.queue) {
		return 0
	}
	return f.book.queue[f.book.head].at.Add(delay).Sub(f.opts.Clock.Now())
}
