package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Rule 8.7 with a real restart of PostgreSQL: three members on a server of
// the test's own, 30 sources on @every 1s. The server is stopped (pg_ctl
// stop -m fast) for 5 s and started again. While it is down no member
// starts a poll once its claims may have lapsed (lease minus the margin
// after the server went down) and every member answers 503 on /readyz;
// once it is back every member is ready again by itself and every source
// is polled again. Nothing regresses: no stored polls_total goes down
// across the outage, a pause committed before it is there after it, and
// after a graceful stop of the cluster the store counts every poll the
// upstream saw (the commits that failed during the outage were retried,
// not dropped).
func TestClusterPostgresRestart(t *testing.T) {
	pg := startPGServer(t)
	u := newUpstream(t)
	var b strings.Builder
	b.WriteString("concurrency: 6\ndefaults:\n  schedule: \"@every 1s\"\n  timeout: 5s\nsources:\n")
	names, paths := make([]string, 30), make([]string, 30)
	for i := range names {
		names[i], paths[i] = fmt.Sprintf("s%d", i), fmt.Sprintf("/s/%d", i)
		u.Set(paths[i], behavior{Hold: 20 * time.Millisecond})
		fmt.Fprintf(&b, "  - {name: %s, type: http, url: \"%s\"}\n", names[i], u.URL(paths[i]))
	}
	ms := startCluster(t, pg.dsn, 3, 0, b.String())
	settled(t, ms[0], names, "m1", "m2", "m3")
	for _, p := range paths[1:] {
		u.waitArrivals(t, p, 2, 10*time.Second)
	}
	// A state committed before the outage: s0 paused (through a member
	// that may not own it).
	if code, body := ms[1].d.do(http.MethodPost, "/api/sources/s0/pause", "", `{"reason": "before the outage"}`); code != http.StatusOK {
		t.Fatalf("pause s0: %d %s", code, body)
	}
	sleepUntil(time.Now().Add(time.Second))
	before := ms[0].in.statusAll()
	pausedPolls := u.Count(paths[0])
	if o := before["s0"]; o.State != "paused" {
		t.Fatalf("s0 before the outage: %s, want paused", o)
	}

	down := pg.stop()
	// The last renewal was before the server went down: no claim holds
	// past the lease minus its margin (a quarter) after that.
	stopBy := down.Add(clusterLease - clusterLease/4)
	for _, m := range ms {
		eventually(t, 4*time.Second, m.name+" answers 503 on /readyz naming the claims", func() error {
			code, body := m.d.do(http.MethodGet, "/readyz", "", "")
			if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "claim") {
				return errf("%d %s", code, body)
			}
			return nil
		})
	}
	sleepUntil(down.Add(5 * time.Second))
	up := pg.start()
	for _, p := range paths {
		for _, at := range u.Times(p) {
			if at.After(stopBy) && at.Before(up) {
				t.Errorf("%s polled at %s, %v after PostgreSQL went down (lease %v): its claim could not be proven then",
					p, at.Format("15:04:05.000"), at.Sub(down).Round(time.Millisecond), clusterLease)
				break
			}
		}
	}

	// Every member recovers by itself; every source but the paused one is
	// polled again.
	for _, m := range ms {
		m.d.waitReady(3*clusterLease + 10*time.Second)
	}
	eventually(t, 3*clusterLease+10*time.Second, "every source polled again after the restart", func() error {
		for _, p := range paths[1:] {
			if firstAfter(u, p, up).IsZero() {
				return errf("%s not polled since PostgreSQL is back", p)
			}
		}
		return nil
	})
	t.Logf("PostgreSQL down %s; every member ready and every source polled again within %v of its start",
		up.Sub(down).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	settled(t, ms[0], names, "m1", "m2", "m3")
	sleepUntil(time.Now().Add(2 * time.Second))
	after := ms[2].in.statusAll()
	checkNoRegress(t, "after the restart", before, after, names)
	if n := u.Count(paths[0]); n != pausedPolls {
		t.Errorf("s0, paused before the outage, was polled %d times after it", n-pausedPolls)
	}

	// A graceful stop of the whole cluster: then the store counts every
	// poll the upstream saw, those of the outage included.
	for _, m := range ms {
		m.d.signal(syscall.SIGTERM)
	}
	for _, m := range ms {
		if code, ok := m.d.wait(15 * time.Second); !ok || code != 0 {
			t.Fatalf("%s after SIGTERM: exited %v, code %d", m.name, ok, code)
		}
	}
	final := ms[0].in.statusAll()
	checkNoRegress(t, "after the cluster stopped", after, final, names)
	lost := 0
	for i, n := range names {
		if got, want := final[n].PollsTotal, int64(u.Count(paths[i])); got != want {
			lost++
			t.Errorf("%s: the store counts %d polls, the upstream saw %d", n, got, want)
		}
	}
	if o := final["s0"]; o.State != "paused" || o.PausedReason != "before the outage" {
		t.Errorf("s0 after the outage: %s, want paused with its reason", o)
	}
	t.Logf("polls in the store against the upstream's count: %d of %d sources differ", lost, len(names))
}

// checkNoRegress fails t for each of names whose stored counters in now
// are below those in before.
func checkNoRegress(t *testing.T, when string, before, now map[string]sourceObj, names []string) {
	t.Helper()
	for _, n := range names {
		b, a := before[n], now[n]
		if a.PollsTotal < b.PollsTotal || a.FailuresTotal < b.FailuresTotal {
			t.Errorf("%s %s: stored polls/failures went down from %d/%d to %d/%d", when, n, b.PollsTotal, b.FailuresTotal, a.PollsTotal, a.FailuresTotal)
		}
	}
}

// Rules 8.3 and 8.4 across a partition: m1 reaches PostgreSQL through a
// proxy that is cut for three leases while m2 keeps polling. m2 takes m1's
// sources over once m1's claims have run out; when the way is back m1
// gets its share back. The commits m1 could not make during the cut were
// written under claims that m2 held since: they are refused, never
// committed over m2's newer states. Snapshots of the store taken all along
// never show a counter going down.
func TestClusterPartitionNoStaleCommit(t *testing.T) {
	dsn, _ := pgStore(t)
	proxy, via := newPGProxy(t, dsn)
	u := newUpstream(t)
	var b strings.Builder
	b.WriteString("concurrency: 4\ndefaults:\n  schedule: \"@every 1s\"\nsources:\n")
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
		fmt.Fprintf(&b, "  - {name: s%d, type: http, url: \"%s\"}\n", i, u.URL(fmt.Sprintf("/s/%d", i)))
	}
	m1, m2 := launchMember(t, via, "m1", 0, b.String()), launchMember(t, dsn, "m2", 0, b.String())
	m1.d.waitReady(30 * time.Second)
	m2.d.waitReady(30 * time.Second)
	// The shares settled: both own sources, and the same ones a second
	// apart.
	var mine int
	var prev string
	var since time.Time
	eventually(t, 4*clusterLease+10*time.Second, "both members owning sources, the same for a second", func() error {
		mine = 0
		own := settled(t, m2, names, "m1", "m2")
		for _, o := range own {
			if o == "m1" {
				mine++
			}
		}
		if cur := fmt.Sprint(own); cur != prev {
			prev, since = cur, time.Now()
		}
		switch {
		case mine == 0 || mine == len(names):
			return errf("m1 owns %d of %d sources", mine, len(names))
		case time.Since(since) < time.Second:
			return errf("the owners changed %v ago", time.Since(since).Round(time.Millisecond))
		}
		return nil
	})

	// The store, read directly, all along.
	stop := make(chan struct{})
	done := make(chan []string, 1)
	var stopOnce sync.Once
	// Also when the test fails before its end: the reader must not outlive
	// it (a Fatal from a goroutine after the test ended panics the binary).
	t.Cleanup(func() { stopOnce.Do(func() { close(stop) }) })
	go func() {
		var problems []string
		seen := map[string]int64{}
		for {
			select {
			case <-stop:
				done <- problems
				return
			case <-time.After(200 * time.Millisecond):
			}
			// execPacer, not cli: a goroutine must not call t.Fatal.
			r, err := execPacer(m2.in.cwd, baseEnv(m2.in.env), 30*time.Second, "status", "-config", m2.in.cfgPath, "-json")
			if err != nil || r.code != 0 {
				continue
			}
			var list []sourceObj
			if json.Unmarshal([]byte(r.stdout), &list) != nil {
				continue
			}
			for _, o := range list {
				if o.PollsTotal < seen[o.Name] {
					problems = append(problems, fmt.Sprintf("%s at %s: polls_total %d, earlier %d", o.Name, time.Now().Format("15:04:05.000"), o.PollsTotal, seen[o.Name]))
				}
				seen[o.Name] = max(seen[o.Name], o.PollsTotal)
			}
		}
	}()
	proxy.setCut(true)
	sleepUntil(time.Now().Add(3 * clusterLease))
	eventually(t, 2*clusterLease, "m2 owning every source while m1 is cut off", func() error {
		for n, o := range m2.owners(t) {
			if o != "m2" {
				return errf("%s owned by %s", n, o)
			}
		}
		return nil
	})
	proxy.setCut(false)
	m1.d.waitReady(4*clusterLease + 5*time.Second)
	// Back to its share once the members see each other live again: with
	// a lease of 2 s a loaded machine's late heartbeats can move shards a
	// few more times first (seen: 8 s of churn beside stress-ng).
	eventually(t, 8*clusterLease, "m1 owning its share again", func() error {
		back := 0
		for _, o := range settled(t, m2, names, "m1", "m2") {
			if o == "m1" {
				back++
			}
		}
		if back != mine {
			return errf("m1 owns %d sources, %d before the cut", back, mine)
		}
		return nil
	})
	sleepUntil(time.Now().Add(3 * time.Second))
	stopOnce.Do(func() { close(stop) })
	for _, p := range <-done {
		t.Errorf("a stored counter went down (a stale commit of m1): %s", p)
	}
	t.Logf("m1 owned %d of 20 sources; cut off for %v, back and sharing again", mine, 3*clusterLease)
}
