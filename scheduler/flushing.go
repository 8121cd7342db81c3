package scheduler

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/scheduler/flush"
)

// flushOptions wires the scheduler's writer (package flush): it commits
// through fenced, a member's fenced committer (setupCluster), or straight
// to st on a single daemon (fenced nil); it keeps keep records per source,
// reports to m and to opts' notification callbacks, and hands the sources
// whose rows a fenced commit refused to rejected (they lost their shard).
func flushOptions(fenced flush.Committer, st Store, log *slog.Logger, clock Clock, m *metrics,
	opts Options, keep *atomic.Int64, rejected func([]flush.Refused)) flush.Options {
	batch := flush.MemberLoadedBatch // a cluster member: the database serves every member
	if fenced == nil {
		fenced, batch = flush.Unfenced(st), 0
	}
	return flush.Options{
		LoadedBatch:   batch,
		Committer:     fenced,
		Logger:        log,
		Clock:         clock,
		Keep:          func() int { return int(keep.Load()) },
		ObserveCommit: func(took time.Duration) { m.storeCommit.Observe(took.Seconds()) },
		CountError:    m.storeErrors.Inc,
		OnEvents:      opts.EventsCommitted,
		OnDropEvents:  opts.EventsDropped,
		OnRejected:    rejected,
	}
}
