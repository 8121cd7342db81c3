package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/waitfor"
	"github.com/pacer-dev/pacer/store"
)

func allShards() []int {
	out := make([]int, domain.Shards)
	for i := range out {
		out[i] = i
	}
	return out
}

func claim(t *testing.T, s *store.Store, member string, lease time.Duration, want, release []int) map[int]domain.Claim {
	t.Helper()
	cs, err := s.ClaimShards(t.Context(), member, lease, want, release)
	if err != nil {
		t.Fatal(err)
	}
	m := map[int]domain.Claim{}
	for _, c := range cs {
		if c.Left <= 0 || c.Left > lease {
			t.Errorf("%s: claim of shard %d has %v left, want within (0, %v]", member, c.Shard, c.Left, lease)
		}
		m[c.Shard] = c
	}
	return m
}

func fenceOf(member string, claims map[int]domain.Claim) domain.Fence {
	f := domain.Fence{Member: member, Fences: map[int]int64{}, ShardOf: func(name string) int { return domain.ShardOf(name, "") }}
	for sh, c := range claims {
		f.Fences[sh] = c.Fence
	}
	return f
}

func TestShardOf(t *testing.T) {
	for _, name := range []string{"a", "b", "api-1", "api-2"} {
		if sh := domain.ShardOf(name, ""); sh < 0 || sh >= domain.Shards || sh != domain.ShardOf(name, "") {
			t.Errorf("ShardOf(%q) = %d", name, sh)
		}
		// The sources of a group share the group's shard.
		if domain.ShardOf(name, "partner") != domain.ShardOf("other", "partner") {
			t.Errorf("%q and other, both in group partner, are on different shards", name)
		}
	}
	seen := map[int]bool{}
	for i := range 2000 {
		seen[domain.ShardOf("src-"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), "")] = true
	}
	if len(seen) < domain.Shards*9/10 {
		t.Errorf("2,000 names fall on %d shards only", len(seen))
	}
}

// TestPostgresClusterClaims: a member claims free shards; another gets none
// of them while the leases hold, and takes them with a new fence once they
// expire; a member's commit carries its fences, and one whose shard was
// taken over writes nothing of that shard.
func TestPostgresClusterClaims(t *testing.T) {
	s := openAt(t, newPostgresDSN(t), store.Options{})
	const lease = 2 * time.Second
	a := claim(t, s, "a", lease, allShards(), nil)
	if len(a) != domain.Shards {
		t.Fatalf("a claimed %d shards of a free cluster, want %d", len(a), domain.Shards)
	}
	if b := claim(t, s, "b", lease, allShards(), nil); len(b) != 0 {
		t.Fatalf("b claimed %d shards held by a", len(b))
	}
	sh := domain.ShardOf("x", "")
	// a renews (want nothing more): it keeps its claims with their fences.
	if again := claim(t, s, "a", lease, nil, nil); !reflect.DeepEqual(again[sh].Fence, a[sh].Fence) || len(again) != domain.Shards {
		t.Errorf("after a renewal a holds %d shards, fence %d; want %d, fence %d", len(again), again[sh].Fence, domain.Shards, a[sh].Fence)
	}
	fa := fenceOf("a", a)
	if rej, err := s.SaveBatchFenced(t.Context(), fa, []domain.SourceState{{Name: "x", PollsTotal: 1}}, nil, 10); err != nil || len(rej) != 0 {
		t.Fatalf("a's fenced commit: rejected %v, %v", rej, err)
	}

	// a stops renewing; after its lease b takes every shard, fences + 1.
	deadline := time.Now().Add(3 * lease)
	var b map[int]domain.Claim
	for {
		if b = claim(t, s, "b", lease, allShards(), nil); len(b) == domain.Shards {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b holds %d shards %v after a's lease of %v", len(b), 3*lease, lease)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b[sh].Fence != a[sh].Fence+1 {
		t.Errorf("fence after the take-over = %d, want %d", b[sh].Fence, a[sh].Fence+1)
	}
	if again := claim(t, s, "a", lease, allShards(), nil); len(again) != 0 {
		t.Errorf("a holds %d shards after b took them", len(again))
	}
	fb := fenceOf("b", b)
	if rej, err := s.SaveBatchFenced(t.Context(), fb, []domain.SourceState{{Name: "x", PollsTotal: 2}}, nil, 10); err != nil || len(rej) != 0 {
		t.Fatalf("b's fenced commit: rejected %v, %v", rej, err)
	}
	// a's late commit (its poll ended after it lost the shard) is refused:
	// b's state stays, and no record of a's is kept.
	rej, err := s.SaveBatchFenced(t.Context(), fa, []domain.SourceState{{Name: "x", PollsTotal: 99}},
		[]domain.PollRecord{record("x", base(), domain.OutcomeSuccess)}, 10)
	if err != nil || !reflect.DeepEqual(rej, []string{"x"}) {
		t.Errorf("a's stale commit: rejected %v, %v; want [x]", rej, err)
	}
	if st := mustGet(t, s, "x"); st.PollsTotal != 2 {
		t.Errorf("x after a's stale commit: polls %d, want b's 2", st.PollsTotal)
	}
	if h, err := s.History(t.Context(), "x", 10); err != nil || len(h) != 0 {
		t.Errorf("history of x after a's stale commit: %d records, %v; want none", len(h), err)
	}
	// Nor an event of a's: it goes with the state it came with.
	ev := domain.Event{Source: "x", Event: "error", At: base()}
	if rej, err := s.CommitFenced(t.Context(), fa, domain.Batch{States: []domain.SourceState{{Name: "x", PollsTotal: 98}}, Events: []domain.Event{ev}}, 10); err != nil || len(rej) != 1 {
		t.Errorf("a's stale commit with an event: rejected %v, %v; want [x]", rej, err)
	}
	if n, err := s.PendingEvents(t.Context()); err != nil || n != 0 {
		t.Errorf("events after a's stale commit: %d, %v; want none", n, err)
	}
	if rej, err := s.CommitFenced(t.Context(), fb, domain.Batch{States: []domain.SourceState{{Name: "x", PollsTotal: 3}}, Events: []domain.Event{ev}}, 10); err != nil || len(rej) != 0 {
		t.Errorf("b's commit with an event: rejected %v, %v", rej, err)
	}
	if n, err := s.PendingEvents(t.Context()); err != nil || n != 1 {
		t.Errorf("events after b's commit: %d, %v; want 1", n, err)
	}

	// b releases half of its shards: a claims them at once, no lease wait.
	half := allShards()[:domain.Shards/2]
	if left := claim(t, s, "b", lease, nil, half); len(left) != domain.Shards-len(half) {
		t.Errorf("b holds %d shards after releasing %d", len(left), len(half))
	}
	if got := claim(t, s, "a", lease, half, nil); len(got) != len(half) {
		t.Errorf("a claimed %d of the %d released shards", len(got), len(half))
	}
}

// TestPostgresClusterMembers: heartbeats make members live; a member that
// stops beating is not live after its lease; one that leaves is gone at
// once, its shards free.
func TestPostgresClusterMembers(t *testing.T) {
	s := openAt(t, newPostgresDSN(t), store.Options{})
	const lease = time.Second
	started := time.Now()
	for _, name := range []string{"m2", "m1"} {
		if _, err := s.Heartbeat(t.Context(), domain.Member{Name: name, StartedAt: started, ConfigFingerprint: "f1", OwnedSources: 3}, lease); err != nil {
			t.Fatal(err)
		}
	}
	live, err := s.Members(t.Context(), lease)
	if err != nil || len(live) != 2 || live[0].Name != "m1" || live[1].Name != "m2" || live[0].OwnedSources != 3 || live[0].ConfigFingerprint != "f1" {
		t.Fatalf("Members = %+v, %v; want m1 and m2", live, err)
	}
	if !live[0].StartedAt.Equal(started.UTC().Truncate(time.Microsecond)) || live[0].LastSeenAt.Before(started.Add(-time.Minute)) {
		t.Errorf("m1 = %+v", live[0])
	}
	claim(t, s, "m2", 10*time.Second, []int{1, 2, 3}, nil)
	if err := s.LeaveCluster(t.Context(), "m2"); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, "m1", 10*time.Second, []int{1, 2, 3}, nil); len(got) != 3 {
		t.Errorf("m1 claimed %d of the 3 shards m2 left", len(got))
	}
	deadline := time.Now().Add(5 * lease)
	for {
		live, err = s.Members(t.Context(), lease)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members %+v still live %v after their last heartbeat (lease %v)", live, 5*lease, lease)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSQLiteHasNoCluster(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "pacer.db"), store.Options{})
	if _, err := s.ClaimShards(t.Context(), "a", time.Second, []int{1}, nil); !errors.Is(err, store.ErrNoCluster) {
		t.Errorf("ClaimShards on SQLite = %v, want ErrNoCluster", err)
	}
	if _, err := s.Heartbeat(t.Context(), domain.Member{Name: "a"}, time.Second); !errors.Is(err, store.ErrNoCluster) {
		t.Errorf("Heartbeat on SQLite = %v, want ErrNoCluster", err)
	}
}

func TestPostgresShardOwnersAndStatesOf(t *testing.T) {
	s := openAt(t, newPostgresDSN(t), store.Options{})
	claim(t, s, "a", 10*time.Second, []int{1, 2}, nil)
	claim(t, s, "b", 10*time.Second, []int{2, 3}, nil)
	if got, err := s.ShardOwners(t.Context()); err != nil || !reflect.DeepEqual(got, map[int]string{1: "a", 2: "a", 3: "b"}) {
		t.Errorf("ShardOwners = %v, %v", got, err)
	}
	save(t, s, []domain.SourceState{fullState("x"), fullState("y"), fullState("z")}, nil, 10)
	got, err := s.LoadStatesOf(t.Context(), []string{"z", "x", "never-saved"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range got {
		names = append(names, st.Name)
		if st.PollsTotal != fullState("x").PollsTotal {
			t.Errorf("%s: %s", st.Name, fmtState(st))
		}
	}
	want := []string{"x", "z"}
	if domain.NameHash("z") < domain.NameHash("x") {
		want = []string{"z", "x"}
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("LoadStatesOf = %v, want %v (table order)", names, want)
	}
}

// TestPostgresFencedCommitHoldsOffTakeOver: a fenced commit that checked its
// claim keeps the shard's row locked to its end, so that a member claiming
// the shard (its lease ran out meanwhile) gets it only after that commit,
// never in the middle of it. The commit is slowed by a trigger that sleeps.
func TestPostgresFencedCommitHoldsOffTakeOver(t *testing.T) {
	dsn := newPostgresDSN(t)
	sa, sb := openAt(t, dsn, store.Options{}), openAt(t, dsn, store.Options{})
	const lease = 2 * time.Second
	sh := domain.ShardOf("x", "")
	a := claim(t, sa, "a", lease, []int{sh}, nil)
	for _, q := range []string{
		"CREATE FUNCTION slow_records() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(" +
			fmt.Sprint((lease + time.Second).Seconds()) + "); RETURN NEW; END $$",
		"CREATE TRIGGER slow_records BEFORE INSERT ON history_tail FOR EACH ROW WHEN (NEW.source = 'x') EXECUTE FUNCTION slow_records()",
	} {
		if err := store.GormDB(sa).Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		rejected []string
		err      error
		at       time.Time
	}
	done := make(chan result, 1)
	go func() {
		rej, err := sa.SaveBatchFenced(context.Background(), fenceOf("a", a), []domain.SourceState{{Name: "x", PollsTotal: 1}},
			[]domain.PollRecord{record("x", base(), domain.OutcomeSuccess)}, 10)
		done <- result{rej, err, time.Now()}
	}()
	// b tries to take the shard until it gets it: not before a's commit,
	// so a's state is committed (visible to b) the moment b holds the
	// shard. (Times taken by the two clients after their calls return
	// cannot order the two: the commit's goroutine may record its end
	// after b's claim returned.)
	claimed := false
	deadline := time.Now().Add(4 * lease)
	for !claimed {
		if got := claim(t, sb, "b", lease, []int{sh}, nil); len(got) == 1 {
			claimed = true
			st, ok, err := sb.GetState(t.Context(), "x")
			if err != nil || !ok || st.PollsTotal != 1 {
				t.Errorf("b claimed the shard before a's commit was visible: state %+v, found %v, %v", st, ok, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("b could not take shard %d within %v", sh, 4*lease)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := <-done
	if r.err != nil || len(r.rejected) != 0 {
		t.Fatalf("a's fenced commit: rejected %v, %v", r.rejected, r.err)
	}
	if rej, err := sa.SaveBatchFenced(t.Context(), fenceOf("a", a), []domain.SourceState{{Name: "x", PollsTotal: 2}}, nil, 10); err != nil || len(rej) != 1 {
		t.Errorf("a's commit after the take-over: rejected %v, %v; want [x]", rej, err)
	}
}

// TestMemberLockShared: members hold the store's lock together; a single
// daemon's exclusive lock is refused while one does, and a member is
// refused while a single daemon holds it. A SQLite store has no member
// lock.
func TestMemberLockShared(t *testing.T) {
	dsn := newPostgresDSN(t)
	a, err := store.AcquireMemberLock(dsn)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.AcquireMemberLock(dsn)
	if err != nil {
		t.Fatalf("a second member: %v", err)
	}
	checkPgLocked(t, dsn, os.Getpid())
	for _, l := range []*store.Lock{a, b} {
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
	solo := mustAcquire(t, dsn)
	var le *store.LockedError
	if l, err := store.AcquireMemberLock(dsn); !errors.As(err, &le) {
		if l != nil {
			_ = l.Release()
		}
		t.Fatalf("a member beside a single daemon: %v, want a *LockedError", err)
	}
	if err := solo.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AcquireMemberLock(filepath.Join(t.TempDir(), "pacer.db")); !errors.Is(err, store.ErrNoCluster) {
		t.Errorf("member lock on SQLite: %v, want ErrNoCluster", err)
	}
}

// TestPostgresReclaimOwnExpiredShard: a member whose lease ran out while
// nobody else claimed the shard (the database was down for all) claims it
// again with the same fence, so that the commits it could not make while
// cut off still go in once it has; a shard that another member held in
// between comes back with a new fence, and the old commits stay refused.
func TestPostgresReclaimOwnExpiredShard(t *testing.T) {
	s := openAt(t, newPostgresDSN(t), store.Options{})
	const lease = 2 * time.Second
	x, y := domain.ShardOf("x", ""), domain.ShardOf("y", "")
	if x == y {
		t.Fatalf("x and y on one shard %d", x)
	}
	a := claim(t, s, "a", lease, []int{x, y}, nil)
	if len(a) != 2 {
		t.Fatalf("a claimed %d shards, want 2", len(a))
	}
	fa := fenceOf("a", a)
	deadline := time.Now().Add(3 * lease)
	for len(claim(t, s, "b", lease, []int{y}, nil)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("b did not get shard %d within %v of a's lease %v", y, 3*lease, lease)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if left := claim(t, s, "b", lease, nil, []int{y}); len(left) != 0 {
		t.Fatalf("b holds %d shards after giving %d back", len(left), y)
	}
	again := claim(t, s, "a", lease, []int{x, y}, nil)
	if again[x].Fence != a[x].Fence {
		t.Errorf("shard %d reclaimed by its own expired owner: fence %d, want the same %d", x, again[x].Fence, a[x].Fence)
	}
	if again[y].Fence <= a[y].Fence {
		t.Errorf("shard %d reclaimed after b held it: fence %d, want above %d", y, again[y].Fence, a[y].Fence)
	}
	rej, err := s.SaveBatchFenced(t.Context(), fa, []domain.SourceState{{Name: "x", PollsTotal: 3}, {Name: "y", PollsTotal: 3}}, nil, 10)
	if err != nil || !reflect.DeepEqual(rej, []string{"y"}) {
		t.Errorf("a's commit with its first fences: rejected %v, %v; want [y] only", rej, err)
	}
	if st := mustGet(t, s, "x"); st.PollsTotal != 3 {
		t.Errorf("x after a's late commit: polls %d, want 3", st.PollsTotal)
	}
}

// TestPostgresFencedCommitAfterLapsedLease: a member whose lease ran out
// while nobody claimed its shard (a lock held on the tables, the server
// away for longer than the lease) still commits what it polled before,
// with the fence it held: no other member can have written the shard's
// states since. Once another member claims the shard, the same commit is
// refused. Before, the first commit was refused too, and the polls it
// carried lost (53 of 1,700 to a 20 s lock on cluster_shards).
func TestPostgresFencedCommitAfterLapsedLease(t *testing.T) {
	s := openAt(t, newPostgresDSN(t), store.Options{})
	const lease = 300 * time.Millisecond
	x := domain.ShardOf("x", "")
	fa := fenceOf("a", claim(t, s, "a", lease, []int{x}, nil))
	waitfor.NoError(t, 10*time.Second, "a's lease on shard x to run out", func() error {
		owners, err := s.ShardOwners(t.Context())
		if err != nil {
			return err
		}
		if o, ok := owners[x]; ok {
			return fmt.Errorf("shard %d still owned by %s", x, o)
		}
		return nil
	})
	rej, err := s.SaveBatchFenced(t.Context(), fa, []domain.SourceState{{Name: "x", PollsTotal: 5}}, nil, 10)
	if err != nil || len(rej) != 0 {
		t.Fatalf("a's commit after its lease lapsed, nobody else claiming: rejected %v, %v; want committed", rej, err)
	}
	if st := mustGet(t, s, "x"); st.PollsTotal != 5 {
		t.Errorf("x after a's commit: polls %d, want 5", st.PollsTotal)
	}
	if len(claim(t, s, "b", time.Minute, []int{x}, nil)) != 1 {
		t.Fatalf("b could not claim the lapsed shard %d", x)
	}
	rej, err = s.SaveBatchFenced(t.Context(), fa, []domain.SourceState{{Name: "x", PollsTotal: 6}}, nil, 10)
	if err != nil || !reflect.DeepEqual(rej, []string{"x"}) {
		t.Errorf("a's commit once b claimed the shard: rejected %v, %v; want [x]", rej, err)
	}
	if st := mustGet(t, s, "x"); st.PollsTotal != 5 {
		t.Errorf("x after a's stale commit: polls %d, want 5 (b's claim fenced a out)", st.PollsTotal)
	}
}

// TestPostgresMemberClockOffset: a member's heartbeat carries its clock's
// offset from the database's, which Members returns (GET /api/cluster's
// clock_offset_ms); a store created before the column existed gets it when
// opened. DatabaseNow is the database's clock.
func TestPostgresMemberClockOffset(t *testing.T) {
	dsn := newPostgresDSN(t)
	s := openAt(t, dsn, store.Options{})
	if err := store.GormDB(s).Exec("ALTER TABLE cluster_members DROP COLUMN clock_offset_ms").Error; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dsn, store.Options{})
	if _, err := s.Heartbeat(t.Context(), domain.Member{Name: "a", StartedAt: time.Now(), ClockOffsetMs: -7003}, time.Minute); err != nil {
		t.Fatalf("heartbeat on a store opened without the column: %v", err)
	}
	ms, err := s.Members(t.Context(), time.Minute)
	if err != nil || len(ms) != 1 || ms[0].ClockOffsetMs != -7003 {
		t.Errorf("members %+v, %v: want a with clock_offset_ms -7003", ms, err)
	}
	before := time.Now()
	now, err := s.DatabaseNow(t.Context())
	if err != nil || now.Before(before.Add(-time.Minute)) || now.After(time.Now().Add(time.Minute)) {
		t.Errorf("DatabaseNow = %v, %v: want about %v (the test server's clock is this machine's)", now, err, before)
	}
}
