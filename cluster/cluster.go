// Package cluster is a member of a cluster of pacer daemons on one
// PostgreSQL store (contract section 8): it keeps the member's heartbeat,
// works out which shards are its share of the live members, claims them,
// renews its leases every lease/3, gives back the shards that belong to
// another member once the scheduler has drained them, and tells the
// scheduler, for each shard, whether it may start a poll now.
//
// Shares follow rendezvous hashing (Assign): each member computes the same
// share from the same list of live members, and when a member joins or
// leaves only the shards it gains or loses move. While the members'
// sources configs differ, a shard's share is among the members with the
// most of its sources (Candidates), so that a source that only some
// members have is owned by one of them (rule 8.1). Leases and heartbeats are
// on the database's clock (the store); the member turns a lease into a
// deadline on its own monotonic clock, taken before the call that granted
// it, and stops starting polls of a shard margin before that deadline, so
// that a member cut off from the database never starts a poll that another
// member may own by then. Commits are fenced (store.SaveBatchFenced), which
// covers the polls that were already running.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"github.com/pacer-dev/pacer/internal/clock"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// Store is what a member needs of the store.
type Store interface {
	Heartbeat(ctx context.Context, m domain.Member, lease time.Duration) ([]domain.Member, error)
	ClaimShards(ctx context.Context, member string, lease time.Duration, want, release []int) ([]domain.Claim, error)
	LeaveCluster(ctx context.Context, member string) error
	PublishShardSources(ctx context.Context, member string, counts map[int]int) error
	ShardSources(ctx context.Context, members []string) (map[string]map[int]int, error)
	DatabaseNow(ctx context.Context) (time.Time, error)
}

var _ Store = (*store.Store)(nil)

// Options configure a Member.
type Options struct {
	Name  string        // this member's name (unique in the cluster)
	Lease time.Duration // how long a claim lasts unrenewed, >= 2s
	// Fingerprint is the member's sources config fingerprint, shown to the
	// others (a member with another one is warned about).
	Fingerprint string
	// ShardSources is the number of the member's configured sources on
	// each shard (domain.ShardOf with their limits group). Published to
	// the others, it gives each shard to a member that has its sources
	// while the members' configs differ (Candidates). nil: not published.
	ShardSources map[int]int
	// Drained reports whether the member has no poll of shard in flight
	// and its states are committed: only then is a shard given back.
	// nil: always.
	Drained func(shard int) bool
	// Stats reports what the member shows in GET /api/cluster. nil: zeros.
	Stats  func() (owned, inflight int)
	Logger *slog.Logger
	// Clock is the member's clock (clock.Real when nil): monotonic for its
	// deadlines, the wall clock whose offset from the database's it
	// measures (ClockOffset), and the timers of its round loop, so that one
	// clock drives the scheduler, the cluster and the notifier.
	Clock clock.Clock
}

// held is a claim as the member keeps it: its fence and until when it may
// start polls of the shard.
type held struct {
	fence    int64
	deadline time.Time
	leaving  bool // another member's share: no new poll, given back once drained
}

// Member is one member of the cluster. It is safe for concurrent use: the
// scheduler calls MayStart and Fence while Run renews the claims.
type Member struct {
	st        Store
	opt       Options
	startedAt time.Time

	mu       sync.Mutex
	claims   map[int]held
	live     []string
	lastErr  error     // the last round's error, nil when it succeeded
	warnedAt time.Time // the last warning about another member's config
	// unpublished: opt.ShardSources changed since the store last had it;
	// sourcesGen counts its changes.
	unpublished bool
	sourcesGen  uint64
	// lastOK is when the last round succeeded; after an outage longer
	// than a lease, the members live before it count as live until
	// graceUntil (see liveAfter).
	lastOK     time.Time
	graceLive  []string
	graceUntil time.Time
	// handing is true while a shard changes hands: the last round did
	// not get every shard of its share, or still holds one of another's.
	handing bool
	// offset is the database's clock minus the member's (ClockOffset),
	// chosen by offsets; offsetWarned is the offset last warned about,
	// offsetWarnedAt when.
	offset         time.Duration
	offsets        offsetFilter // the measures offset is chosen from
	offsetWarned   time.Duration
	offsetWarnedAt time.Time
}

// New returns a member; Run makes it take part.
func New(st Store, opt Options) (*Member, error) {
	if opt.Name == "" {
		return nil, fmt.Errorf("cluster: a member needs a name")
	}
	if opt.Lease < 2*time.Second {
		return nil, fmt.Errorf("cluster.lease: %v is below the minimum of 2s", opt.Lease)
	}
	if opt.Clock == nil {
		opt.Clock = clock.Real{}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Member{st: st, opt: opt, startedAt: opt.Clock.Now(), claims: map[int]held{}, unpublished: opt.ShardSources != nil}, nil
}

// margin is how long before a lease's end the member stops starting polls
// of its shard: a quarter of the lease (with renewals every third, a
// healthy member never gets there).
func (m *Member) margin() time.Duration { return m.opt.Lease / 4 }

// MayStart reports whether the member may start a poll of a source of
// shard now: it holds the shard and the claim's deadline is ahead.
func (m *Member) MayStart(shard int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.claims[shard]
	return ok && !h.leaving && m.opt.Clock.Now().Before(h.deadline)
}

// StatementTimeout bounds every statement of the member and of its
// scheduler's commits: the lease minus the margin. A round that answers
// later than that grants claims whose deadlines have passed already, so
// the bound cuts nothing useful, and a statement that hangs counts as an
// outage (claims unrenewed, commits held and retried, GET /readyz 503)
// instead of a wait for as long as the database. Half a lease was too
// tight: on a loaded machine a renewal took 1.4 s of a 2 s lease, still
// in time, and the bound of 1 s made the member give up its shards.
func (m *Member) StatementTimeout() time.Duration { return m.opt.Lease - m.margin() }

// Renewed returns nil when the member's last round succeeded, else the
// reason: until a round succeeds again the member cannot tell which of
// its claims still hold, and its scheduler holds its commits rather than
// have them refused (a claim that lapsed during an outage comes back with
// the same fence when nobody else took it).
func (m *Member) Renewed() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastErr != nil {
		return fmt.Errorf("cannot renew the cluster claims: %w", m.lastErr)
	}
	return nil
}

// Ready returns nil when the member's last round succeeded and it may
// start polls of some shard, else the reason (GET /readyz answers 503).
func (m *Member) Ready() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastErr != nil {
		return fmt.Errorf("cannot renew the cluster claims: %w", m.lastErr)
	}
	now := m.opt.Clock.Now()
	for _, h := range m.claims {
		if !h.leaving && now.Before(h.deadline) {
			return nil
		}
	}
	return errors.New("cluster: this member holds no shard yet")
}

// Live returns the number of live members seen at the last round.
func (m *Member) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// SetFingerprint changes the sources config fingerprint the member shows
// (after a reload).
func (m *Member) SetFingerprint(fp string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opt.Fingerprint = fp
}

// SetShardSources changes the member's number of configured sources per
// shard (after a reload); the next round publishes it.
func (m *Member) SetShardSources(counts map[int]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opt.ShardSources = counts
	m.unpublished = counts != nil
	m.sourcesGen++
}

// Name is the member's name.
func (m *Member) Name() string { return m.opt.Name }

// Shards returns the shards the member may start polls of now, in order.
func (m *Member) Shards() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opt.Clock.Now()
	out := make([]int, 0, len(m.claims))
	for sh, h := range m.claims {
		if !h.leaving && now.Before(h.deadline) {
			out = append(out, sh)
		}
	}
	slices.Sort(out)
	return out
}

// Fence returns what the member's commits are conditional on
// (store.SaveBatchFenced): its current claims, and shardOf to place a
// source (domain.ShardOf with the source's limits group).
func (m *Member) Fence(shardOf func(source string) int) domain.Fence {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := domain.Fence{Member: m.opt.Name, Fences: make(map[int]int64, len(m.claims)), ShardOf: shardOf}
	for sh, h := range m.claims {
		f.Fences[sh] = h.fence
	}
	return f
}
