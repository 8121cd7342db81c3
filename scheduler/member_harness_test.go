package scheduler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/cluster"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/pgtest"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// The cluster tests of the scheduler run members on a real PostgreSQL
// store (PACER_TEST_POSTGRES, a schema of their own) with real
// cluster.Members; gatedMember lets a test narrow what a member may do.

// openPG opens a store in a fresh schema of the test server, closed when t
// ends (before the schema is dropped, after the schedulers started later
// are shut down: cleanups run last first).
func openPG(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(pgtest.Schema(t, "sched_"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// newClusterMember is a real cluster member named name on st.
func newClusterMember(t *testing.T, st *store.Store, name string) *cluster.Member {
	t.Helper()
	m, err := cluster.New(st, cluster.Options{Name: name, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runMember runs m's rounds until t ends.
func runMember(t *testing.T, m *cluster.Member) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// gatedMember is a real cluster member whose answers a test narrows: a
// denied shard may not start polls (as when its claim is ending), and
// while held the member's claims count as not renewed (its commits wait,
// as after a failed round).
type gatedMember struct {
	*cluster.Member
	mu     sync.Mutex
	denied map[int]bool
	held   atomic.Bool
}

func gate(m *cluster.Member) *gatedMember { return &gatedMember{Member: m, denied: map[int]bool{}} }

func (g *gatedMember) deny(shard int, denied bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.denied[shard] = denied
}

func (g *gatedMember) MayStart(shard int) bool {
	g.mu.Lock()
	denied := g.denied[shard]
	g.mu.Unlock()
	return !denied && g.Member.MayStart(shard)
}

func (g *gatedMember) Renewed() error {
	if g.held.Load() {
		return errors.New("test: the claims are not renewed")
	}
	return g.Member.Renewed()
}

// startMemberScheduler starts a scheduler on cfg and st for the member
// own, with the pollers of newPoller (nil: the real ones), shut down when
// t ends.
func startMemberScheduler(t *testing.T, cfg *config.Config, st Store, own Ownership,
	newPoller func(*config.Source) (sources.Poller, error)) *Scheduler {
	t.Helper()
	s, err := New(cfg, Options{Store: st, Registry: prometheus.NewRegistry(), Ownership: own,
		CommandInterval: 50 * time.Millisecond, NewPoller: newPoller})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(5 * time.Second); err != nil {
			t.Error(err)
		}
	})
	return s
}

// polls reports whether this member polls the shard sh now.
func (s *Scheduler) polls(sh int) bool {
	s.tab.mu.Lock()
	defer s.tab.mu.Unlock()
	return s.deps.shards.Polls(sh)
}

// busyNow reports whether name is queued, waiting for permits or polling.
func (s *Scheduler) busyNow(name string) bool {
	s.tab.mu.Lock()
	defer s.tab.mu.Unlock()
	return s.tab.entries[name].slot.Busy()
}

// testPoller counts its polls; with hold set, each poll signals started
// and waits for hold to be closed.
type testPoller struct {
	n       atomic.Int32
	started chan struct{}
	hold    chan struct{}
}

func newTestPoller(hold bool) *testPoller {
	p := &testPoller{started: make(chan struct{}, 16)}
	if hold {
		p.hold = make(chan struct{})
	}
	return p
}

func (p *testPoller) Poll(ctx context.Context) sources.Result {
	p.n.Add(1)
	if p.hold != nil {
		p.started <- struct{}{}
		select {
		case <-p.hold:
		case <-ctx.Done():
			return sources.Result{Err: ctx.Err()}
		}
	}
	return sources.Result{}
}

// pollersOf is a NewPoller that gives each source its poller in ps.
func pollersOf(ps map[string]*testPoller) func(*config.Source) (sources.Poller, error) {
	return func(src *config.Source) (sources.Poller, error) {
		if p := ps[src.Name]; p != nil {
			return p, nil
		}
		return newTestPoller(false), nil
	}
}

// shardsApart fails t unless the sources named lie on distinct shards.
func shardsApart(t *testing.T, names ...string) {
	t.Helper()
	seen := map[int]string{}
	for _, n := range names {
		sh := domain.ShardOf(n, "")
		if other, ok := seen[sh]; ok {
			t.Fatalf("sources %s and %s share shard %d: pick other names", other, n, sh)
		}
		seen[sh] = n
	}
}
