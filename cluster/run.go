package cluster

import (
	"context"
	"time"
)

// roundEvery is the longest time between two rounds: shards that another
// member gave back are claimed within it (rule 8.3: within 2 s of a
// member's exit).
const roundEvery = time.Second

// handoverEvery is the time between two rounds while a shard changes
// hands (Round's handing): the member giving a shard back releases it as
// soon as its polls are drained, and the member taking it claims it soon
// after, rather than a full round later each. With rounds every lease/3
// (up to roundEvery) both waits paused the shard's polls, a limits group
// with its rate among them, for up to two rounds more.
const handoverEvery = 200 * time.Millisecond

// Run takes part in the cluster until ctx is done: a round every lease/3,
// at most roundEvery apart, every handoverEvery while a shard changes
// hands (for up to a lease; a failed round is logged and retried at the next), then it
// leaves the cluster, giving its shards back at once. The caller cancels
// ctx once its polls have ended and its states are committed.
func (m *Member) Run(ctx context.Context) {
	every := min(m.opt.Lease/3, roundEvery)
	t := m.opt.Clock.NewTimer(every)
	defer t.Stop()
	failing := false
	var handingSince time.Time
	for {
		begun := m.opt.Clock.Now()
		err := m.Round(ctx)
		wait := every
		m.mu.Lock()
		handing := err == nil && m.handing
		m.mu.Unlock()
		switch {
		case !handing:
			handingSince = time.Time{}
		case handingSince.IsZero():
			handingSince = begun
			fallthrough
		case begun.Sub(handingSince) < m.opt.Lease:
			// A hand-over longer than a lease waits for a long poll or
			// for a dead member's lease: quick rounds would only load
			// the database meanwhile.
			wait = min(wait, handoverEvery)
		}
		t.Reset(max(wait-m.opt.Clock.Now().Sub(begun), 0))
		if ctx.Err() == nil {
			m.mu.Lock()
			m.lastErr = err
			m.mu.Unlock()
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			m.opt.Logger.Warn("cluster: cannot renew the claims; polls of their shards stop before the leases end", "err", err)
			failing = true
		case err == nil && failing:
			m.opt.Logger.Info("cluster: claims renewed again")
			failing = false
		}
		select {
		case <-ctx.Done():
			m.leave()
			return
		case <-t.C():
		}
	}
}

// leave gives every shard back and drops the member's row.
func (m *Member) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.mu.Lock()
	m.claims = map[int]held{}
	m.mu.Unlock()
	if err := m.st.LeaveCluster(ctx, m.opt.Name); err != nil {
		m.opt.Logger.Warn("cluster: leave (the others take the shards when the leases end)", "err", err)
	}
}
