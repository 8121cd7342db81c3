package cluster

// A member's round: its heartbeat, the live members, its share of the
// shards, and its claims.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

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
	members, fp, err := m.heartbeat(ctx)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	m.warnFingerprints(members, fp)
	if err := m.publish(ctx); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	live := m.liveOf(members)
	has, err := m.holders(ctx, members, live, fp)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	want, leaving := m.share(live, has)
	if err := m.claim(ctx, want, m.drained(leaving)); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// heartbeat measures the clock offset and records the member's heartbeat,
// with what it shows the others; it returns the live members the store
// knows and the member's sources config fingerprint.
func (m *Member) heartbeat(ctx context.Context) ([]domain.Member, string, error) {
	var owned, inflight int
	if m.opt.Stats != nil {
		owned, inflight = m.opt.Stats()
	}
	off, err := m.MeasureOffset(ctx)
	if err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	fp := m.opt.Fingerprint
	m.mu.Unlock()
	members, err := m.st.Heartbeat(ctx, domain.Member{Name: m.opt.Name, StartedAt: m.startedAt,
		ConfigFingerprint: fp, OwnedSources: owned, Inflight: inflight, ClockOffsetMs: off.Milliseconds()}, m.opt.Lease)
	return members, fp, err
}

// liveOf is the list of live members a round works with (liveAfter), from
// the store's, this member among them.
func (m *Member) liveOf(members []domain.Member) []string {
	live := make([]string, 0, len(members))
	for _, mb := range members {
		live = append(live, mb.Name)
	}
	if !slices.Contains(live, m.opt.Name) {
		live = append(live, m.opt.Name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.liveAfter(live, m.opt.Clock.Now())
}

// share is the member's share of the shards among live (has: Candidates),
// in want, in order; the shards it holds that are another's are marked
// leaving (MayStart turns false) and returned in leaving.
func (m *Member) share(live []string, has map[string]map[int]int) (want, leaving []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for sh := range domain.Shards {
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
	return want, leaving
}

// drained is, of the shards leaving, those the scheduler has drained
// (Options.Drained), asked outside the member's lock: they are released.
func (m *Member) drained(leaving []int) []int {
	var release []int
	for _, sh := range leaving {
		if m.opt.Drained == nil || m.opt.Drained(sh) {
			release = append(release, sh)
		}
	}
	return release
}

// claim releases the shards of release, renews and claims those of want,
// and keeps what the store granted: each claim's fence and deadline, on
// the member's clock read before the call.
func (m *Member) claim(ctx context.Context, want, release []int) error {
	start := m.opt.Clock.Now()
	claims, err := m.st.ClaimShards(ctx, m.opt.Name, m.opt.Lease, want, release)
	if err != nil {
		return err
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
	due := m.unpublished || (!m.lastOK.IsZero() && m.opt.Clock.Now().Sub(m.lastOK) > m.opt.Lease)
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
func (m *Member) holders(ctx context.Context, members []domain.Member, live []string, fp string) (map[string]map[int]int, error) {
	differ := false
	for _, mb := range members {
		differ = differ || (fp != "" && mb.ConfigFingerprint != "" && mb.ConfigFingerprint != fp)
	}
	if !differ {
		return nil, nil
	}
	return m.st.ShardSources(ctx, live)
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
func (m *Member) warnFingerprints(members []domain.Member, fp string) {
	now := m.opt.Clock.Now()
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
