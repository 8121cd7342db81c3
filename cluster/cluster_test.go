package cluster_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"github.com/pacer-dev/pacer/internal/clock"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, to hold a lock
	"go.uber.org/goleak"

	"github.com/pacer-dev/pacer/cluster"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/pgtest"
	"github.com/pacer-dev/pacer/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newDSN creates a schema of its own on the server of PACER_TEST_POSTGRES
// and returns a store URL on it; the test fails without the variable.
func newDSN(t *testing.T) string { return pgtest.Schema(t, "c_") }

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	s, err := store.Open(dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newMember(t *testing.T, s cluster.Store, name string, lease time.Duration) *cluster.Member {
	t.Helper()
	m, err := cluster.New(s, cluster.Options{Name: name, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// owners maps each shard to the members that may start its polls.
func owners(ms ...*cluster.Member) map[int][]int {
	out := map[int][]int{}
	for i, m := range ms {
		for _, sh := range m.Shards() {
			out[sh] = append(out[sh], i)
		}
	}
	return out
}

// settle runs rounds of every member until each shard is owned by the one
// member Assign gives it to among names (the names of ms), failing at once
// if a shard ever has two owners, or after timeout.
func settle(t *testing.T, timeout time.Duration, names []string, ms ...*cluster.Member) map[int][]int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, m := range ms {
			if err := m.Round(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		o := owners(ms...)
		done := len(o) == domain.Shards
		for sh, who := range o {
			if len(who) > 1 {
				t.Fatalf("a shard has %d owners: %v", len(who), who)
			}
			done = done && names[who[0]] == cluster.Assign(names, sh)
		}
		if done {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d shards owned after %v", len(o), domain.Shards, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAssign(t *testing.T) {
	if got := cluster.Assign(nil, 3); got != "" {
		t.Errorf("Assign(nil) = %q", got)
	}
	three, four := []string{"a", "b", "c"}, []string{"a", "b", "c", "d"}
	moved, count := 0, map[string]int{}
	for sh := range domain.Shards {
		x, y := cluster.Assign(three, sh), cluster.Assign(four, sh)
		count[x]++
		if x != y {
			moved++
			if y != "d" {
				t.Errorf("shard %d moved from %s to %s when d joined; only shards that d gains may move", sh, x, y)
			}
		}
	}
	if moved < domain.Shards/8 || moved > domain.Shards*3/8 {
		t.Errorf("%d shards moved when a fourth member joined, want about a quarter", moved)
	}
	for name, n := range count {
		if n < domain.Shards/6 {
			t.Errorf("%s got %d of %d shards among three", name, n, domain.Shards)
		}
	}
}

// TestMembersShareAndTakeOver: three members share the shards, each shard
// owned by exactly one; a member that stops (killed: no leave) has its
// shards taken over within 2 x lease; a member that leaves hands them over
// at once.
func TestMembersShareAndTakeOver(t *testing.T) {
	dsn := newDSN(t)
	const lease = 2 * time.Second
	a := newMember(t, openStore(t, dsn), "a", lease)
	b := newMember(t, openStore(t, dsn), "b", lease)
	c := newMember(t, openStore(t, dsn), "c", lease)
	o := settle(t, 10*time.Second, []string{"a", "b", "c"}, a, b, c)
	per := map[int]int{}
	for _, who := range o {
		per[who[0]]++
	}
	if len(per) != 3 {
		t.Fatalf("shards per member %v: every member must own some", per)
	}

	// c is killed: it neither renews nor leaves.
	killed := time.Now()
	settle(t, 2*lease+time.Second, []string{"a", "b"}, a, b)
	if took := time.Since(killed); took > 2*lease {
		t.Errorf("c's shards taken over after %v, want within 2 x lease (%v)", took, 2*lease)
	}

	// b leaves: a owns everything at its next round.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	cancel()
	<-done
	if err := a.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Shards()); n != domain.Shards {
		t.Errorf("a owns %d shards right after b left, want %d", n, domain.Shards)
	}
}

// TestCutOffMemberStopsFirst: a member that cannot reach the database any
// more stops starting polls of its shards before another member can claim
// them.
func TestCutOffMemberStopsFirst(t *testing.T) {
	dsn := newDSN(t)
	const lease = 2 * time.Second
	cutStore, err := store.Open(dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cut := newMember(t, cutStore, "cut", lease)
	other := newMember(t, openStore(t, dsn), "other", lease)
	if err := cut.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	mine := cut.Shards()
	if len(mine) != domain.Shards {
		t.Fatalf("cut owns %d shards alone, want all", len(mine))
	}
	// Cut off: every call of cut fails from now on.
	if err := cutStore.Close(); err != nil {
		t.Fatal(err)
	}
	var stoppedAt, claimedAt time.Time
	deadline := time.Now().Add(3 * lease)
	for stoppedAt.IsZero() || claimedAt.IsZero() {
		if err := cut.Round(t.Context()); err == nil {
			t.Fatal("a round on a closed store succeeded")
		}
		if stoppedAt.IsZero() && !cut.MayStart(mine[0]) {
			stoppedAt = time.Now()
		}
		if err := other.Round(t.Context()); err != nil {
			t.Fatal(err)
		}
		if claimedAt.IsZero() && other.MayStart(mine[0]) {
			claimedAt = time.Now()
			if cut.MayStart(mine[0]) {
				t.Fatal("the other member claimed a shard that the cut-off member still starts polls of")
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: stopped at %v, claimed at %v", 3*lease, stoppedAt, claimedAt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !stoppedAt.Before(claimedAt) {
		t.Errorf("the cut-off member stopped at %v, not before the take-over at %v", stoppedAt, claimedAt)
	}
}

// TestShardGivenBackOnceDrained: when a member joins, the shards it gains
// stop being startable on their holder at once (MayStart false), and are
// given back only once the holder reports them drained; the newcomer
// claims them then. Ready reports a member with no shard.
func TestShardGivenBackOnceDrained(t *testing.T) {
	dsn := newDSN(t)
	const lease = 2 * time.Second
	var mu sync.Mutex
	drained := false
	a, err := cluster.New(openStore(t, dsn), cluster.Options{Name: "a", Lease: lease, Drained: func(int) bool {
		mu.Lock()
		defer mu.Unlock()
		return drained
	}})
	if err != nil {
		t.Fatal(err)
	}
	b := newMember(t, openStore(t, dsn), "b", lease)
	if err := a.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Shards()); n != domain.Shards || a.Ready() != nil {
		t.Fatalf("a alone: %d shards, ready %v", n, a.Ready())
	}
	for range 2 {
		for _, m := range []*cluster.Member{b, a} {
			if err := m.Round(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := []string{"a", "b"}
	for sh := range domain.Shards {
		if cluster.Assign(names, sh) == "b" && (a.MayStart(sh) || b.MayStart(sh)) {
			t.Fatalf("shard %d of b before a drained it: a may start %v, b %v", sh, a.MayStart(sh), b.MayStart(sh))
		}
	}
	if err := b.Ready(); err == nil {
		t.Error("b holds no shard yet but is ready")
	}
	mu.Lock()
	drained = true
	mu.Unlock()
	settle(t, 10*time.Second, names, a, b)
	if err := b.Ready(); err != nil {
		t.Errorf("b with its share: %v", err)
	}
}

// nowClock is the wall clock read through now (the test moves it).
type nowClock struct {
	clock.Real
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

// TestConfigMismatchWarned: a member whose sources config differs from
// another live member's logs a warning naming both, at most once a minute.
func TestConfigMismatchWarned(t *testing.T) {
	dsn := newDSN(t)
	var buf syncBuf
	var mu sync.Mutex
	offset := time.Duration(0)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(offset)
	}
	log := slog.New(slog.NewTextHandler(&buf, nil))
	a, err := cluster.New(openStore(t, dsn), cluster.Options{Name: "a", Lease: 2 * time.Second, Fingerprint: "fa", Logger: log, Clock: nowClock{now: now}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cluster.New(openStore(t, dsn), cluster.Options{Name: "b", Lease: 2 * time.Second, Fingerprint: "fb"})
	if err != nil {
		t.Fatal(err)
	}
	round := func() {
		for _, m := range []*cluster.Member{b, a} {
			if err := m.Round(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	warnings := func() int { return strings.Count(buf.String(), "different sources config") }
	round()
	round()
	if n := warnings(); n != 1 || !strings.Contains(buf.String(), "member=a other=b") {
		t.Fatalf("after two rounds: %d warnings, want 1 naming a and b:\n%s", n, buf.String())
	}
	mu.Lock()
	offset = time.Minute
	mu.Unlock()
	round()
	if n := warnings(); n != 2 {
		t.Fatalf("a minute later: %d warnings, want 2", n)
	}
	b.SetFingerprint("fa")
	mu.Lock()
	offset = 3 * time.Minute
	mu.Unlock()
	round()
	if n := warnings(); n != 2 {
		t.Fatalf("once the configs agree: %d warnings, want still 2", n)
	}
}

// syncBuf is a bytes.Buffer safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOutageKeepsShares: when no member could reach the database for more
// than a lease (every heartbeat and lease ran out together), the first
// member back claims its own share only, not the shards of the members
// live before the outage, and each gets its own shards back with the same
// fence (so that the commits held since the outage still go in).
func TestOutageKeepsShares(t *testing.T) {
	const lease = 2 * time.Second
	dsn := newDSN(t)
	sa, sb := openStore(t, dsn), openStore(t, dsn)
	a, b := newMember(t, sa, "a", lease), newMember(t, sb, "b", lease)
	names := []string{"a", "b"}
	settle(t, 10*time.Second, names, a, b)
	fence := func(m *cluster.Member) map[int]int64 {
		return m.Fence(func(string) int { return 0 }).Fences
	}
	before := map[string]map[int]int64{"a": fence(a), "b": fence(b)}
	// The outage: neither runs a round for longer than a lease.
	deadline := time.Now().Add(lease + lease/2)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if len(a.Shards()) != 0 || len(b.Shards()) != 0 {
		t.Fatalf("claims still usable after the leases ran out: a %d, b %d shards", len(a.Shards()), len(b.Shards()))
	}
	if err := a.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, sh := range a.Shards() {
		if cluster.Assign(names, sh) != "a" {
			t.Fatalf("a, first back after the outage, claimed shard %d of b", sh)
		}
	}
	if err := b.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	if o := owners(a, b); len(o) != domain.Shards {
		t.Errorf("after one round each, %d of %d shards owned", len(o), domain.Shards)
	}
	for name, m := range map[string]*cluster.Member{"a": a, "b": b} {
		for sh, fe := range fence(m) {
			if was, ok := before[name][sh]; !ok || was != fe {
				t.Errorf("%s holds shard %d with fence %d after the outage, want its own fence %d (held %v)", name, sh, fe, was, ok)
			}
		}
	}
}

// TestRoundBoundedWhenStatementHangs: a round whose statement hangs (a
// session holds cluster_shards locked) fails within three quarters of a
// lease (the lease minus the margin), as a
// lost connection does, instead of waiting for as long as the lock (rule
// 8.7: the member then holds its commits and answers 503 on /readyz); once
// the lock is gone a round renews the claims with the same fences.
func TestRoundBoundedWhenStatementHangs(t *testing.T) {
	dsn := newDSN(t)
	s := openStore(t, dsn)
	const lease = 2 * time.Second
	m := newMember(t, s, "a", lease)
	if err := m.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := m.Fence(func(string) int { return 0 }).Fences
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("LOCK TABLE cluster_shards IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// The lock ends by itself after 5 s, so that a round that waits for
	// it (the fault) returns, late and without an error.
	released := make(chan error, 1)
	go func() {
		_, err := tx.Exec("SELECT pg_sleep(5)")
		released <- errors.Join(err, tx.Rollback())
	}()
	began := time.Now()
	err = m.Round(t.Context())
	took := time.Since(began)
	if bound := lease - lease/4 + time.Second; err == nil || took > bound {
		t.Errorf("a round against a locked cluster_shards returned %v after %v, want an error within %v", err, took.Round(time.Millisecond), bound)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if err := m.Round(t.Context()); err != nil {
		t.Fatalf("a round once the lock is gone: %v", err)
	}
	after := m.Fence(func(string) int { return 0 }).Fences
	if len(after) != len(before) {
		t.Fatalf("the member holds %d shards after the lock, %d before", len(after), len(before))
	}
	for sh, fe := range before {
		if after[sh] != fe {
			t.Errorf("shard %d: fence %d after the lock, %d before (nobody else claimed it)", sh, after[sh], fe)
		}
	}
}
