// Package scheduler decides when each source is polled and runs the polls
// under the global semaphore and the group limits (contract section 3).
//
// Idle sources wait in a min-heap ordered by the time they are next due:
// max(next schedule tick, backoff, breaker cooldown, Retry-After). One loop
// pops whatever is due and hands it to its group's queue (if it has a
// group) or straight to the global queue, which a fixed pool of
// `concurrency` workers drains. A source is in at most one queue at a time,
// so nothing grows with time, only with the number of sources. The heap,
// the queues, the groups and the permits are the queue room's
// (scheduler/queue).
//
// # Lock order
//
// The scheduler is a facade over parts that each own their data (the
// table of sources, the workers, control, the board, the membership, the
// lifecycle: see Scheduler); the table's mu is the one lock they share.
// The scheduler takes its locks in this order, never one while a later one
// is held:
//
//	Scheduler.reloading -> table.mu -> { flusher.mu, the cluster
//	member's lock (Ownership: MayStart, Fence), a queue FIFO's lock
//	(queue.FIFO), the transports' lock (sources.Transports) }
//
// The locks in braces are leaves: none of them is held while another lock
// is taken, and none calls back into the scheduler (the flusher calls
// onRejected and onEvents with its lock released). lockedLog.mu is taken
// only without mu (locklog.go). Under mu nothing slow runs: no store read or
// write (the flusher commits; reload and take-over read the store before
// they lock), no poller build (newPollers runs before Reload and StartFrom
// take mu) and no log line (written by unlock once mu is released:
// locklog.go). A group's admitter and a worker wait for jobs, permits,
// tokens and commits with no lock held.
package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/flush"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/queue"
	"github.com/pacer-dev/pacer/scheduler/rates"
	"github.com/pacer-dev/pacer/scheduler/shards"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Errors of the control methods, matched with errors.Is.
var (
	ErrNotFound = errors.New("unknown source")
	ErrConflict = errors.New("conflict")
)

// Store is what the scheduler needs of its store: the stored states at
// start and reload, the flusher's batched writes, the history not held in
// memory, the CLI's command queue and the watchdog's write probe.
// *store.Store (SQLite) implements it; a second backend implements the same.
type Store interface {
	LoadStates(ctx context.Context) ([]domain.SourceState, error)
	GetState(ctx context.Context, name string) (domain.SourceState, bool, error)
	Commit(ctx context.Context, b domain.Batch, keep int) error
	History(ctx context.Context, name string, n int) ([]domain.PollRecord, error)
	Histories(ctx context.Context, names []string, n int) (map[string][]domain.PollRecord, error)
	PendingCommands(ctx context.Context) ([]domain.Command, error)
	ClaimCommand(ctx context.Context, id uint64) (bool, error)
	OrphanedCommands(ctx context.Context) ([]domain.Command, error)
	CompleteCommand(ctx context.Context, id uint64, result, code string) error
	Writable(ctx context.Context) error
	SaveHosts(ctx context.Context, hs []domain.HostState) error
	LoadHosts(ctx context.Context) ([]domain.HostState, error)
}

var _ Store = (*store.Store)(nil)

// Options are a scheduler's collaborators. Store and Registry are required.
type Options struct {
	Store    Store
	Logger   *slog.Logger          // nil: discard
	Clock    Clock                 // nil: RealClock
	Registry prometheus.Registerer // where the metrics go
	// MaxConcurrency, when > 0, caps the configured concurrency (the
	// descriptor-limit clamp).
	MaxConcurrency int
	// DescriptorCap, when set, returns the highest concurrency the
	// descriptor limit allows for a configuration (its polls' deliveries
	// hold descriptors too: contract section 7). It is applied with
	// MaxConcurrency, at New and on every Reload.
	DescriptorCap func(cfg *config.Config) int
	// CommandInterval is how often the store's command queue is read
	// (default 250ms); the CLI's commands take effect within it.
	CommandInterval time.Duration
	// LoopHook, if set, is called at the start of every pass of the
	// scheduling loop. Tests use it to stall the loop (the watchdog test).
	LoopHook func()
	// NewPoller, if set, builds the pollers instead of sources.New. The
	// scheduler benchmarks use it to measure scheduling alone (a no-op
	// poll); the daemon never sets it.
	NewPoller func(src *config.Source) (sources.Poller, error)
	// Ownership, for a member of a cluster, says which shards it may poll
	// (cluster.go); the store must then be a ClusterStore. nil: all.
	Ownership Ownership
	// EventsCommitted, if set, is called after each commit that wrote
	// notification events (the notify sender's wake-up); it must not block.
	EventsCommitted func()
	// EventsDropped, if set, is called with the number of notification
	// events dropped because the store failed for so long that a source's
	// pending events outgrew their bound (64 per source, the newest kept).
	EventsDropped func(n int)
}

// Scheduler runs the polls of one daemon. It is a facade: each part of
// the work is a type owning its data, wired here (New) and reached through
// the methods below.
type Scheduler struct {
	deps *deps       // the collaborators, shared by every part
	tab  *table      // the sources' runtimes and the one scheduler lock, mu
	life *lifecycle  // the stages Start begins and Shutdown stops
	wk   *workers    // the dispatch loop and the workers: the polls
	ctl  *control    // the operator's actions and the CLI's commands
	brd  *board      // the read-only views: rows, explanations, histories
	cl   *membership // a member's shards: take-over, remote sources

	// reloading makes Reloads one at a time: a reload builds its pollers
	// before it takes mu, from a look at the entries only a reload changes.
	reloading sync.Mutex
}

// deps are the scheduler's collaborators, fixed at New: a plain record,
// without behaviour, that every part holds.
type deps struct {
	store     Store
	log       *slog.Logger
	clock     Clock
	m         *metrics
	flush     *flush.Flusher
	clients   *sources.Clients // the http pollers' clients, shared
	transport *transport
	deliverer resultDeliverer // of every source with deliver (contract 9.3)
	// shards is the cluster room: the shards this member polls, their
	// fences and owners (a single daemon's polls every shard). Lock
	// order: mu, then the room's.
	shards    *shards.Room
	maxConc   int
	descCap   func(*config.Config) int // Options.DescriptorCap
	cmdEvery  time.Duration
	loopHook  func()
	newPoller func(src *config.Source) (sources.Poller, error)
	// viewHook, if set (by tests), is called between the chunks of the
	// passes over every source (board.go), the lock released.
	viewHook func()
	// rates samples the load of the last hour for the status page's
	// charts (rates.go); its Run is a goroutine of the dispatching stage.
	rates *rates.Sampler
}

// table is the sources' runtimes: the configuration in force, the entries
// and their indexes, the queue room, and mu, the scheduler's one lock,
// which guards them all (and the fields the other parts note as guarded by
// it). Its methods are the changes of an entry (entries.go), the log lines
// noted under mu (locklog.go), the coalesced throttle lines (flaplog.go),
// the steps of the wall clock (steps.go) and the shard index (shardindex.go).
type table struct {
	*deps
	mu sync.Mutex
	// logs holds the log lines noted under mu, written by unlock after it
	// (locklog.go).
	logs   lockedLog
	cfg    *config.Config
	redact *config.Redactor
	cfgCap int // descCap of cfg, or 0
	// keep is cfg's history.keep, read without mu (the flusher, History).
	keep    atomic.Int64
	entries map[string]*entry
	// reloadMark is flipped at each reload; the entries of the sources the
	// reload keeps take its value (reloadSources).
	reloadMark bool
	// q is the queue room: the due heap, the in-flight marks, the groups,
	// the global queue, the claimed polls and the workers. Its heap, marks,
	// claimed list, groups map and workers are guarded by mu.
	q *queue.Queue[*entry]
	// flapping lists the sources with coalesced throttle transitions to
	// report (flaplog.go); flapSweepAt is the loop's next look at them.
	flapping    []*entry
	flapSweepAt time.Time
	// maint is where the loop's look at windows' ends and reminders is
	// (maintenance.go).
	maint maintSweep
	// byShard, the entries of each shard, is rebuilt when shardDirty.
	byShard    [domain.Shards][]*entry
	shardDirty bool
	// clk reads the clocks and holds the skew (steps.go); its skew is
	// guarded by mu.
	clk     clocks
	started bool
	stopped bool
	// hs is the state of the table's part of contract section 13
	// (hostsRoom), guarded by mu.
	hs hostState
}

// entry is one source's runtime: its settings, poller, breaker and state.
// All fields are guarded by table.mu, except that a worker reads
// src, poller, brk and timing of the generation it was dispatched with.
type entry struct {
	name   string
	src    *config.Source
	timing policy.Timing
	poller sources.Poller
	brk    *breaker.Breaker
	group  *queue.Group[*entry] // its `limit` group, or nil
	gen    uint64
	shard  int // domain.ShardOf(name, its limits group)

	st   domain.SourceState
	slot queue.Slot[*entry] // its place in the queue room (due heap, in flight, claimed)

	sl           *flush.Slot // its place in the flusher
	removed      bool        // dropped from the config while in flight
	resetPending bool        // reset while polling: applied when the poll ends
	mark         bool        // table.reloadMark when the last reload saw it
	savedSeq     uint64
	localErrs    int   // consecutive local errors (policy.KindLocal), the memory of policy.LocalRetry
	added        int64 // when this member configured it (Unix ns): the earliest tick it may owe (missedTick)
	// flap coalesces its throttle transitions (flaplog.go); nil until its
	// first one: at 100,000 sources the healthy majority, which never
	// flaps, saves the window's 56 bytes each.
	flap *flapWindow
}

const (
	// minWake is the shortest sleep of the scheduling loop (it bounds the
	// wake-ups to 500 a second, at the cost of up to 2 ms of start lag).
	minWake = 2 * time.Millisecond
	// commitRecheck is how soon a due source whose last state is not yet
	// committed is looked at again.
	commitRecheck = 5 * time.Millisecond
)
