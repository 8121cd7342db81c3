//go:build faults

package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/pacer-dev/pacer/domain"
)

const (
	// crashMembers is the size of the cluster of TestFaultCrashCluster.
	crashMembers = 3
	// crashDoubleGap: two polls of a source on "@every 1s" closer than
	// this are one tick polled twice. A tick missed at a take-over gives
	// way to the next one when that is within half a period (scheduler
	// catchUp); the rest is for the start lags of two polls on a loaded
	// machine.
	crashDoubleGap = 300 * time.Millisecond
)

// crashMember is one member of TestFaultCrashCluster: its instance (its
// own config file and admin address) and its current daemon. Each restart
// gets a new name, as a daemon restarted with the default name
// (HOSTNAME-PID) would: the others take its shards over once its lease
// has run out, and hand some back to it when it joins again.
type crashMember struct {
	in       *inst
	d        *daemon
	runq     *runqSampler // the daemon's wait for a CPU
	name     string
	restarts int
}

// crashKill is one kill of TestFaultCrashCluster: when, which member, the
// sources it owned just before.
type crashKill struct {
	at     time.Time
	victim string
	owned  map[string]bool
	runq   *runqSampler // the victim's wait for a CPU until its kill
	pg     *pgRunq      // PostgreSQL's processes' waits for a CPU
	// conns are the local ends of the victim's TCP connections while it
	// was stopped (sentBy).
	conns map[netip.AddrPort]bool
	// final: not a kill, the connections of a member before the graceful
	// stop at the end (crashSender).
	final bool
}

// launch (re)starts m under a new name on dsn with the sources body.
func (m *crashMember) launch(t *testing.T, i int, dsn, body string) {
	t.Helper()
	m.name = fmt.Sprintf("m%d-%d", i+1, m.restarts)
	m.restarts++
	// Replaced, not rewritten: the status snapshots read m's config
	// while it restarts.
	replaceFile(t, m.in.cfgPath, "store: \""+dsn+"\"\nadmin:\n  listen: \""+m.in.addr+"\"\n"+
		fmt.Sprintf("cluster: {name: %s, lease: %s}\n", m.name, clusterLease)+body)
	m.d = faultSpawn(m.in)
	m.runq = sampleRunq(m.d.pid())
	t.Cleanup(m.runq.Stop)
}

// TestFaultCrashCluster is TestFaultCrash on PostgreSQL with three members
// (contract section 8 with rules 3.7 and 3.8): the 300 sources of
// TestFaultCrash on three members of one cluster; 50 times a member picked
// at random is SIGKILLed 100ms..1.5s after the previous restart and
// restarted at once under a new name. While it runs, `pacer status -json`
// reads the store over and over: every snapshot must be consistent with
// all earlier ones (counters only grow, error and pause states and their
// reasons never go away, an always-failing source has
// consecutive_failures == failures_total == polls_total). No source that
// always succeeds is polled twice within half a tick (two members never
// poll one tick, not even during a take-over or a hand-over: no two polls
// within crashDoubleGap). At the end
// every source that is not in error or paused is polled again, and after a
// graceful stop of the cluster the polls the upstream saw minus those in
// the store are, per source, at most the kills at which the killed member
// owned it with a poll in flight or just answered (a poll cut off by a
// crash counts as nothing, rule 3.8; none is lost otherwise).
func TestFaultCrashCluster(t *testing.T) {
	testStart := time.Now()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>7|1))
	t.Logf("seed %d", seed)
	dsn, _ := pgStore(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	pgq, err := samplePGRunq(db)
	if err != nil {
		t.Fatalf("following PostgreSQL's wait for a CPU (the server must run on this machine): %v", err)
	}
	t.Cleanup(pgq.Stop)
	fu := newFaultUpstream(t)
	srcs := crashSources(fu)
	body := crashConfig(srcs)
	ms := make([]*crashMember, crashMembers)
	for i := range ms {
		ms[i] = &crashMember{in: newInst(t)}
		ms[i].launch(t, i, dsn, body)
	}
	for _, m := range ms {
		if err := faultWaitReady(m.d, 30*time.Second); err != nil {
			t.Fatalf("%s not ready: %v\n%s", m.name, err, m.d.logs())
		}
	}
	var logMu sync.Mutex
	var allLogs []func() string
	for _, m := range ms {
		allLogs = append(allLogs, m.d.logs)
	}
	tr := &crashTracker{
		t: t, srcs: srcs, by: map[string]crashSrc{},
		maxPolls: map[string]int64{}, maxFail: map[string]int64{}, maxThr: map[string]int64{},
		maxCF: map[string]int{}, errSeen: map[string]string{}, errWhere: map[string]string{},
		pauseSeen: map[string]string{}, pauseWhere: map[string]string{}, pausable: map[string]bool{},
		logs: func(names ...string) string {
			logMu.Lock()
			defer logMu.Unlock()
			var b strings.Builder
			for i := max(0, len(allLogs)-4); i < len(allLogs); i++ {
				if ls := faultGrep(allLogs[i](), 6, names...); len(ls) > 0 {
					fmt.Fprintf(&b, "  member log %d:\n    %s\n", i, strings.Join(ls, "\n    "))
				}
			}
			return b.String()
		},
	}
	for _, s := range srcs {
		tr.by[s.name] = s
	}
	// A few pauses through the CLI (the store's command queue, to the
	// owners), before the first kill.
	wantPause := map[string]int{"ok": 4, "hang": 2, "failx": 2}
	for _, s := range srcs {
		if wantPause[s.kind] > 0 {
			wantPause[s.kind]--
			tr.pausable[s.name] = true
			ms[0].in.mustCLI("pause", s.name, "-reason", "pause of "+s.name)
		}
	}
	sleepUntil(time.Now().Add(4 * time.Second))

	snaps := startCrashSnapshots(ms[0].in)
	var kills []crashKill
	restartedAt := time.Now()
	for k := range crashKills {
		i := rng.IntN(crashMembers)
		m := ms[i]
		sleepUntil(restartedAt.Add(100*time.Millisecond + time.Duration(rng.Int64N(int64(1400*time.Millisecond)))))
		// Stopped, the victim neither starts a poll nor gives a shard back
		// while its claims are read.
		m.d.signal(syscall.SIGSTOP)
		owned := claimedSources(t, db, m.name, srcs)
		conns, err := tcpEnds(m.d.pid())
		if err != nil {
			t.Errorf("kill %d: the connections of %s: %v", k, m.name, err)
		}
		kills = append(kills, crashKill{at: time.Now(), victim: m.name, owned: owned, runq: m.runq, pg: pgq, conns: conns})
		m.d.kill()
		m.runq.Stop()
		t.Logf("kill %d: %s at %s, owning %d sources; in the second before, its threads waited %s for a CPU, PostgreSQL's most-starved process %s",
			k, m.name, kills[k].at.Format("15:04:05.000"), len(owned), m.runq.between(kills[k].at.Add(-time.Second), kills[k].at).Round(time.Millisecond),
			pgq.maxBetween(kills[k].at.Add(-time.Second), kills[k].at).Round(time.Millisecond))
		m.launch(t, i, dsn, body)
		logMu.Lock()
		allLogs = append(allLogs, m.d.logs)
		logMu.Unlock()
		if err := faultWaitReady(m.d, 30*time.Second); err != nil {
			t.Fatalf("kill %d: %s (restarted) not ready: %v\n%s", k, m.name, err, m.d.logs())
		}
		restartedAt = time.Now()
		snaps.check(tr, false)
		if tr.problems > 200 {
			t.Fatalf("too many problems; stopping after kill %d", k)
		}
	}
	// Every source not in error or paused is polled again once the last
	// member is back: the breakers' cooldown is 2 s, the longest backoff
	// 5 s and the longest Retry-After 4 s.
	lastKill := kills[len(kills)-1].at
	sleepUntil(time.Now().Add(2*clusterLease + 6*time.Second))
	snaps.check(tr, true)
	stored := ms[0].in.statusAll()
	tr.store(crashSnap{label: "after the last kill", m: stored})
	for _, s := range srcs {
		if o := stored[s.name]; s.isHTTP() && o.State != "error" && o.State != "paused" && crashLastArrival(fu, s.path).Before(lastKill) {
			tr.fail("%s (%s, state %s) not polled since the last kill at %s: %s", s.name, s.kind, o.State, lastKill.Format("15:04:05.000"), o)
		}
	}

	killed := len(kills)
	// The connections of the members still running, as those of the
	// killed ones were read at their kills: who sent which request.
	for _, m := range ms {
		conns, err := tcpEnds(m.d.pid())
		if err != nil {
			t.Errorf("the connections of %s: %v", m.name, err)
		}
		kills = append(kills, crashKill{at: time.Now(), victim: m.name + " (stopped at the end)", conns: conns, final: true})
	}
	for _, m := range ms {
		m.d.signal(syscall.SIGTERM)
	}
	for _, m := range ms {
		if code, ok := m.d.wait(20 * time.Second); !ok || code != 0 {
			t.Fatalf("%s after SIGTERM: exited %v, code %d", m.name, ok, code)
		}
	}
	final := ms[0].in.statusAll()
	tr.store(crashSnap{label: "after the cluster stopped", m: final})
	logMu.Lock()
	texts := make([]string, 0, len(allLogs))
	for _, l := range allLogs {
		texts = append(texts, l())
	}
	logMu.Unlock()
	dropped := crashDropped(texts)
	t.Logf("the members' warnings and errors, by message:%s", crashWarnings(texts))
	if ls := crashDropLines(texts, 40); len(ls) > 0 {
		t.Logf("the members' lines naming dropped or cut-off polls:\n  %s", strings.Join(ls, "\n  "))
	}
	named := 0
	for _, n := range dropped {
		named += n
	}
	doubles, lost, unanswered := crashClusterPolls(t, tr, fu, ms[0].in, srcs, kills, final, dropped)
	t.Logf("the polls missing from the store, by what may explain them: %s", crashLossSummary(ms[0].in, srcs, fu, kills, final, 12))
	errs, paused := 0, 0
	for _, o := range final {
		switch o.State {
		case "error":
			errs++
		case "paused":
			paused++
		}
	}
	if len(tr.errSeen) == 0 {
		t.Errorf("no source reached the error state during the test")
	}
	t.Logf("TestFaultCrashCluster figures: %d kills of %d members; states lost %d (must be 0); problems %d; polls lost at kills or dropped %d, polled twice in a tick %d (must be 0), recorded but unanswered %d; polls the members' logs name as dropped (refused commits) or cut off (stops) %d; final error %d paused %d; snapshots %d; upstream requests %d; wall %s",
		killed, crashMembers, tr.statesLost, tr.problems, lost, doubles, unanswered, named, errs, paused, snaps.n, fu.Total(), time.Since(testStart).Round(time.Second))
	if tr.statesLost != 0 {
		t.Errorf("%d error/pause states lost across kills", tr.statesLost)
	}
}

// window is how long before k a poll answered by a may have waited for
// its commit and been lost with the victim: the commit window (rule 3.8)
// plus what the machine took between the answer and the kill, from this
// process (its lateness), from the victim (its threads' wait for a CPU),
// as the single daemon's crash test allows, and from PostgreSQL (the
// longest wait for a CPU of one of its processes, where the commit runs).
func (k crashKill) window(a faultArrival) time.Duration {
	w := crashCommitWindow + crashCommitSlack
	if a.Done.IsZero() || !a.Done.Before(k.at) {
		return w
	}
	w += stalls.lateBetween(a.Done, k.at)
	if k.runq != nil {
		w += k.runq.between(a.Done, k.at)
	}
	return w + k.pg.maxBetween(a.Done, k.at)
}

// crashClusterPolls checks the upstream's arrivals against the store after
// the cluster's graceful stop: no always-succeeding source polled twice
// within half a tick, and per http source the polls missing from the store
// at most the kills that can explain them plus the polls of it that the
// members' logs name as dropped (dropped, crashDropped). It returns the
// doubles, the polls lost and the recorded polls that never reached the
// upstream.
func crashClusterPolls(t *testing.T, tr *crashTracker, fu *faultUpstream, in *inst, srcs []crashSrc, kills []crashKill,
	final map[string]sourceObj, dropped map[string]int) (doubles, lost, unanswered int) {
	t.Helper()
	for _, s := range srcs {
		if !s.isHTTP() {
			continue
		}
		arr := fu.Arrivals(s.path)
		if s.kind == "ok" {
			for i := 1; i < len(arr); i++ {
				// A late poll (its start waited for the commit before it,
				// rule 3.8, on a loaded PostgreSQL) and the next tick's on
				// time come closer than that too, but then the poll before
				// the late one lies two ticks before the second: a tick
				// polled twice has it within about a tick and a half.
				if i >= 2 && arr[i].At.Sub(arr[i-2].At) >= 1500*time.Millisecond {
					continue
				}
				if gap := arr[i].At.Sub(arr[i-1].At); gap < crashDoubleGap {
					doubles++
					tr.fail("%s polled twice within %v (at %s by %s and %s by %s; the one before %s): one tick polled twice\n%s", s.name, gap,
						arr[i-1].At.Format("15:04:05.000"), crashSender(arr[i-1], kills), arr[i].At.Format("15:04:05.000"), crashSender(arr[i], kills),
						crashBefore(arr, i-2, kills), tr.logs(s.name))
					break
				}
			}
		}
		// The kills that may have lost one poll of s: its owner was
		// killed with a poll of it in flight or answered within the
		// commit window (rule 3.8) before, widened by what the machine
		// took from this process and from the victim between the answer
		// and the kill (crashKill.window, as the single daemon's crash test
		// does: a starved member commits late),
		// or with a request of it sent before the stop that the handler
		// here got to after the kill (sentBy: over one of its connections).
		explained := 0
		for _, k := range kills {
			if !k.owned[s.name] {
				continue
			}
			for _, a := range arr {
				window := k.window(a)
				if !a.At.After(k.at) && (a.Done.IsZero() || !a.Done.Before(k.at.Add(-window))) || k.sentBy(a) {
					explained++
					break
				}
			}
		}
		missing := len(arr) - int(final[s.name].PollsTotal)
		switch {
		case missing > explained+dropped[s.name]:
			tr.fail("%s: the upstream saw %d polls, the store counts %d: %d lost, but only %d kills of its owner had one in flight and the logs name %d dropped: %s\n%s",
				s.name, len(arr), final[s.name].PollsTotal, missing, explained, dropped[s.name], final[s.name], tr.logs(s.name)+crashLossDetail(in, s.name, arr, kills))
		case missing < 0:
			n, recs := unansweredPolls(in, s.name, time.Time{})
			unanswered += -missing
			if -missing > n {
				tr.fail("%s: the store counts %d polls, the upstream saw %d, and only %d recorded polls timed out unanswered\nhistory: %s",
					s.name, final[s.name].PollsTotal, len(arr), n, recs)
			}
		default:
			lost += missing
		}
	}
	return doubles, lost, unanswered
}

// claimedSources reads from the store the sources of the shards victim
// holds a claim on (with or without time left: a poll it started before
// its lease ran short may still run). A member starts polls only of the
// shards it holds and gives one back only once its polls of it have ended
// and their states are committed (rule 8.4), so with victim stopped these
// are every source of which a kill of it can cut a poll off, without the
// lag of its API's view.
func claimedSources(t *testing.T, db *sql.DB, victim string, srcs []crashSrc) map[string]bool {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT shard FROM cluster_shards WHERE owner = $1", victim)
	if err != nil {
		t.Fatalf("claims of %s: %v", victim, err)
	}
	defer rows.Close()
	held := map[int]bool{}
	for rows.Next() {
		var sh int
		if err := rows.Scan(&sh); err != nil {
			t.Fatalf("claims of %s: %v", victim, err)
		}
		held[sh] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("claims of %s: %v", victim, err)
	}
	owned := map[string]bool{}
	for _, s := range srcs {
		if held[domain.ShardOf(s.name, "")] {
			owned[s.name] = true
		}
	}
	return owned
}

// crashLastArrival is the time of the last request on path (zero if none).
func crashLastArrival(fu *faultUpstream, path string) time.Time {
	arr := fu.Arrivals(path)
	if len(arr) == 0 {
		return time.Time{}
	}
	return arr[len(arr)-1].At
}

// crashSnapshots reads the store with `pacer status -json` every 100ms
// until stopped (one CLI run at a time).
type crashSnapshots struct {
	mu    sync.Mutex
	got   []crashSnap
	errs  []string
	n     int
	quit  chan struct{}
	ended chan struct{}
}

func startCrashSnapshots(in *inst) *crashSnapshots {
	c := &crashSnapshots{quit: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(c.ended)
		for i := 0; ; i++ {
			st := time.Now()
			r, err := faultCLI(in, 30*time.Second, "status", "-json")
			var list []sourceObj
			if err == nil && r.code == 0 {
				err = json.Unmarshal([]byte(r.stdout), &list)
			} else if err == nil {
				err = fmt.Errorf("%s", r)
			}
			c.mu.Lock()
			if err != nil {
				c.errs = append(c.errs, err.Error())
			} else {
				m := make(map[string]sourceObj, len(list))
				for _, o := range list {
					m[o.Name] = o
				}
				c.got = append(c.got, crashSnap{label: fmt.Sprintf("status #%d", i), start: st, end: time.Now(), m: m})
				c.n++
			}
			c.mu.Unlock()
			select {
			case <-c.quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return c
}

// take returns the snapshots taken since the last call, in order, and
// the errors of the status reads that failed.
func (c *crashSnapshots) take() ([]crashSnap, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, errs := c.got, c.errs
	c.got, c.errs = nil, nil
	sort.SliceStable(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out, errs
}

// check hands the snapshots taken since the last call to tr; stop ends
// the reads first.
func (c *crashSnapshots) check(tr *crashTracker, stop bool) {
	tr.t.Helper()
	if stop {
		close(c.quit)
		<-c.ended
	}
	got, errs := c.take()
	for _, e := range errs {
		tr.fail("pacer status -json while the cluster ran failed: %s", e)
	}
	for _, s := range got {
		tr.store(s)
	}
}
