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
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/store"
)

// Store is what a member needs of the store.
type Store interface {
	Heartbeat(ctx context.Context, m store.Member, lease time.Duration) ([]store.Member, error)
	ClaimShards(ctx context.Context, member string, lease time.Duration, want, release []int) ([]store.Claim, error)
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
	// each shard (store.ShardOf with their limits group). Published to
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
	// Now is the member's clock (time.Now when nil): monotonic for its
	// deadlines, and the wall clock whose offset from the database's it
	// measures (ClockOffset).
	Now func() time.Time
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
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Member{st: st, opt: opt, startedAt: opt.Now(), claims: map[int]held{}, unpublished: opt.ShardSources != nil}, nil
}

// margin is how long before a lease's end the member stops starting polls
// of its shard: a quarter of the lease (with renewals every third, a
// healthy member never gets there).
func (m *Member) margin() time.Duration { return m.opt.Lease / 4 }

// Assign is the member, among live, that shard belongs to: the one with
// the highest hash of (member, shard); "" when live is empty.
func Assign(live []string, shard int) string {
	best, bestH := "", uint64(0)
	suffix := "\x00" + strconv.Itoa(shard)
	for _, name := range live {
		if v := store.NameHash(name + suffix); best == "" || v > bestH || (v == bestH && name < best) {
			best, bestH = name, v
		}
	}
	return best
}

// Round is one round of the member: heartbeat, then claims (release what
// is another's and drained, renew, claim the free shards of its share). On
// an error the claims it holds stay with their deadlines, which then run
// out.
//
// A shard that belongs to another member is marked leaving first (MayStart
// turns false), and Drained is asked after that, outside the member's lock:
// a scheduler that checks MayStart and marks a poll in flight under one
// lock of its own then never starts a poll of a shard being given back.
func (m *Member) Round(ctx context.Context) error {
	// A statement that hangs (a lock held on the cluster's tables, a
	// server that stopped answering) fails the round as a lost connection
	// does (rule 8.7): without the bound the round waited for as long as
	// the lock, the member looked healthy and its commits went on, then
	// were refused once its leases had run out (53 polls lost of 1,700).
	ctx, cancel := context.WithTimeout(ctx, m.StatementTimeout())
	defer cancel()
	var owned, inflight int
	if m.opt.Stats != nil {
		owned, inflight = m.opt.Stats()
	}
	off, err := m.MeasureOffset(ctx)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	m.mu.Lock()
	fp := m.opt.Fingerprint
	m.mu.Unlock()
	members, err := m.st.Heartbeat(ctx, store.Member{Name: m.opt.Name, StartedAt: m.startedAt,
		ConfigFingerprint: fp, OwnedSources: owned, Inflight: inflight, ClockOffsetMs: off.Milliseconds()}, m.opt.Lease)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	m.warnFingerprints(members, fp)
	if err := m.publish(ctx); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	live := make([]string, 0, len(members))
	for _, mb := range members {
		live = append(live, mb.Name)
	}
	if !slices.Contains(live, m.opt.Name) {
		live = append(live, m.opt.Name)
	}
	m.mu.Lock()
	live = m.liveAfter(live, m.opt.Now())
	m.mu.Unlock()
	has, err := m.holders(ctx, members, live, fp)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	var want, leaving []int
	m.mu.Lock()
	for sh := range store.Shards {
		h, have := m.claims[sh]
		if Assign(Candidates(live, has, sh), sh) == m.opt.Name {
			want = append(want, sh)
			continue
		}
		if have {
			h.leaving = true
			m.claims[sh] = h
			leaving = append(leaving, sh)
		}
	}
	m.live = live
	m.mu.Unlock()
	var release []int
	for _, sh := range leaving {
		if m.opt.Drained == nil || m.opt.Drained(sh) {
			release = append(release, sh)
		}
	}
	start := m.opt.Now()
	claims, err := m.st.ClaimShards(ctx, m.opt.Name, m.opt.Lease, want, release)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	next := make(map[int]held, len(claims))
	handing := len(claims) != len(want)
	for _, c := range claims {
		_, mine := slices.BinarySearch(want, c.Shard)
		next[c.Shard] = held{fence: c.Fence, deadline: start.Add(c.Left - m.margin()), leaving: !mine}
		handing = handing || !mine
	}
	m.mu.Lock()
	m.claims = next
	m.handing = handing
	m.lastOK = start
	m.mu.Unlock()
	return nil
}

// publish records the member's sources per shard in the store when they
// changed since, or after a round that failed for more than a lease (the
// others may have forgotten the member, and its counts with it).
func (m *Member) publish(ctx context.Context) error {
	m.mu.Lock()
	counts, gen := m.opt.ShardSources, m.sourcesGen
	due := m.unpublished || (!m.lastOK.IsZero() && m.opt.Now().Sub(m.lastOK) > m.opt.Lease)
	m.mu.Unlock()
	if !due || counts == nil {
		return nil
	}
	if err := m.st.PublishShardSources(ctx, m.opt.Name, counts); err != nil {
		return err
	}
	m.mu.Lock()
	if m.sourcesGen == gen {
		m.unpublished = false
	}
	m.mu.Unlock()
	return nil
}

// holders is, while the live members' sources configs differ (members:
// their heartbeats; fp: this member's), how many sources each member of
// live has on each shard; nil while they agree (every member has the same
// sources: any may own any shard).
func (m *Member) holders(ctx context.Context, members []store.Member, live []string, fp string) (map[string]map[int]int, error) {
	differ := false
	for _, mb := range members {
		differ = differ || (fp != "" && mb.ConfigFingerprint != "" && mb.ConfigFingerprint != fp)
	}
	if !differ {
		return nil, nil
	}
	return m.st.ShardSources(ctx, live)
}

// Candidates is, of live, the members that may own shard. With has (the
// number of sources each member has on each shard; nil: alike) it is
// those with the most sources on the shard, so that a source in one
// member's config and not in another's is owned, and polled, by one that
// has it (rule 8.1): the member a source was added to first takes its
// shard, and a member that still has a source removed from another's
// config keeps it. Two members each with a source of one shard that the
// other has not cannot both poll it: the shard goes to one of them until
// their configs agree.
func Candidates(live []string, has map[string]map[int]int, shard int) []string {
	if has == nil {
		return live
	}
	best := 0
	for _, name := range live {
		best = max(best, has[name][shard])
	}
	if best == 0 {
		return live
	}
	out := make([]string, 0, len(live))
	for _, name := range live {
		if has[name][shard] == best {
			out = append(out, name)
		}
	}
	return out
}

// offsetStep is the least change of the measured clock offset that moves
// the one the member schedules by: the measure's own error (half a round
// trip) would otherwise move the scheduler's clock back and forth by
// milliseconds at every round.
const offsetStep = 50 * time.Millisecond

// clockWarnAbove is the offset from the database's clock above which a
// member logs a warning (rule 8.1): it schedules on the database's clock
// anyway, but its logs' times and its operator's view are off by that much.
const clockWarnAbove = time.Second

// MeasureOffset measures the database's clock minus the member's (from
// the middle of the call), keeps as ClockOffset the measure of the shortest
// recent round trip when it moved by offsetStep or more (offsetFilter), and
// warns, at most once a minute unless it moves by
// another second, while it exceeds clockWarnAbove. Every round calls it;
// the daemon calls it once before its scheduler starts, so that the
// scheduler's clock does not jump at the first round.
func (m *Member) MeasureOffset(ctx context.Context) (time.Duration, error) {
	t0 := m.opt.Now()
	db, err := m.st.DatabaseNow(ctx)
	if err != nil {
		return 0, err
	}
	t1 := m.opt.Now()
	measured := db.Sub(t0.Add(t1.Sub(t0) / 2))
	m.mu.Lock()
	m.offset = m.offsets.add(t1.Sub(t0), measured)
	off := m.offset
	far := off > clockWarnAbove || off < -clockWarnAbove
	moved := off-m.offsetWarned > clockWarnAbove || m.offsetWarned-off > clockWarnAbove
	warn := far && (m.offsetWarnedAt.IsZero() || moved || t1.Sub(m.offsetWarnedAt) >= time.Minute)
	if warn {
		m.offsetWarned, m.offsetWarnedAt = off, t1
	}
	m.mu.Unlock()
	if warn {
		m.opt.Logger.Warn("cluster: this member's clock is off from the database's; it schedules on the database's clock",
			"member", m.opt.Name, "clock_offset_ms", off.Milliseconds())
	}
	return off, nil
}

// ClockOffset is the database's clock minus the member's, as last
// measured (0 before the first round): the member's scheduler runs on its
// clock plus this (scheduler.DatabaseClock), so that the due times and
// phases members hand over through the store agree whatever their own
// clocks say (rule 8.1).
func (m *Member) ClockOffset() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offset
}

// liveAfter is the list of live members a round works with, from live,
// those whose heartbeat the database shows within a lease. After this
// member could not reach the database for more than a lease (a restart
// of PostgreSQL, a partition), every other member's heartbeat may be old
// for the same reason: for one lease from then, the members live before
// the outage still count as live, so that the first member back does not
// claim everyone's shards (their commits, held since the outage, would
// then be refused) only to give them back a round later. A member that
// died meanwhile has its shards taken over one lease later. mu held.
func (m *Member) liveAfter(live []string, now time.Time) []string {
	if !m.lastOK.IsZero() && now.Sub(m.lastOK) > m.opt.Lease && m.graceUntil.Before(now) {
		m.graceLive, m.graceUntil = slices.Clone(m.live), now.Add(m.opt.Lease)
	}
	if now.Before(m.graceUntil) {
		for _, name := range m.graceLive {
			if !slices.Contains(live, name) {
				live = append(live, name)
			}
		}
	}
	slices.Sort(live)
	return live
}

// fingerprintWarnEvery bounds the warnings about members whose sources
// config differs from this member's (rule 8.6).
const fingerprintWarnEvery = time.Minute

// warnFingerprints logs, at most once every fingerprintWarnEvery, the
// live members whose sources config differs from this member's.
func (m *Member) warnFingerprints(members []store.Member, fp string) {
	now := m.opt.Now()
	m.mu.Lock()
	due := m.warnedAt.IsZero() || now.Sub(m.warnedAt) >= fingerprintWarnEvery
	m.mu.Unlock()
	if !due || fp == "" {
		return
	}
	warned := false
	for _, mb := range members {
		if mb.Name == m.opt.Name || mb.ConfigFingerprint == "" || mb.ConfigFingerprint == fp {
			continue
		}
		m.opt.Logger.Warn("cluster: another member runs a different sources config; each source is polled with its owner's",
			"member", m.opt.Name, "other", mb.Name, "fingerprint", fp, "other_fingerprint", mb.ConfigFingerprint)
		warned = true
	}
	if warned {
		m.mu.Lock()
		m.warnedAt = now
		m.mu.Unlock()
	}
}

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
	t := time.NewTimer(every)
	defer t.Stop()
	failing := false
	var handingSince time.Time
	for {
		begun := time.Now()
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
		t.Reset(max(wait-time.Since(begun), 0))
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
		case <-t.C:
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

// MayStart reports whether the member may start a poll of a source of
// shard now: it holds the shard and the claim's deadline is ahead.
func (m *Member) MayStart(shard int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.claims[shard]
	return ok && !h.leaving && m.opt.Now().Before(h.deadline)
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
	now := m.opt.Now()
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
	now := m.opt.Now()
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
// source (store.ShardOf with the source's limits group).
func (m *Member) Fence(shardOf func(source string) int) store.Fence {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := store.Fence{Member: m.opt.Name, Fences: make(map[int]int64, len(m.claims)), ShardOf: shardOf}
	for sh, h := range m.claims {
		f.Fences[sh] = h.fence
	}
	return f
}
