package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The cluster of contract section 8, with the real binary: three members
// on one PostgreSQL store, each with the same sources.

// clusterLease is cluster.lease in these tests (the minimum is 2s).
const clusterLease = 2 * time.Second

// member is one daemon of a test cluster.
type member struct {
	name string
	in   *inst
	d    *daemon
}

// ownerObj is what these tests read of a source object.
type ownerObj struct {
	Name    string  `json:"name"`
	State   string  `json:"state"`
	Breaker string  `json:"breaker"`
	Owner   *string `json:"owner"`
}

// startCluster starts n members on dsn with body (concurrency, limits,
// sources) and cluster.concurrency cc, and waits until each is ready (it
// holds a shard).
func startCluster(t *testing.T, dsn string, n, cc int, body string) []*member {
	t.Helper()
	ms := make([]*member, n)
	for i := range ms {
		ms[i] = launchMember(t, dsn, fmt.Sprintf("m%d", i+1), cc, body)
	}
	for _, m := range ms {
		m.d.waitReady(30 * time.Second)
	}
	return ms
}

// launchMember starts member name on dsn (without waiting for it).
func launchMember(t *testing.T, dsn, name string, cc int, body string) *member {
	t.Helper()
	in := newInst(t)
	writeFile(t, in.cfgPath, "store: \""+dsn+"\"\nadmin:\n  listen: \""+in.addr+"\"\n"+
		fmt.Sprintf("cluster: {name: %s, lease: %s, concurrency: %d}\n", name, clusterLease, cc)+body)
	return &member{name: name, in: in, d: in.launch(in.cfgPath, true)}
}

// owners reads every source's owner from m's API.
func (m *member) owners(t *testing.T) map[string]string {
	t.Helper()
	var list []ownerObj
	m.d.getJSON("/api/sources", &list)
	out := make(map[string]string, len(list))
	for _, o := range list {
		if o.Owner != nil {
			out[o.Name] = *o.Owner
		}
	}
	return out
}

// settled waits until every one of names has an owner among live, as m's
// API shows, and returns them.
func settled(t *testing.T, m *member, names []string, live ...string) map[string]string {
	t.Helper()
	var own map[string]string
	eventually(t, 4*clusterLease+5*time.Second, "every source owned by a live member", func() error {
		own = m.owners(t)
		for _, n := range names {
			o, ok := own[n]
			if !ok {
				return errf("%s has no owner", n)
			}
			if !containsStr(live, o) {
				return errf("%s owned by %s, not a live member", n, o)
			}
		}
		return nil
	})
	return own
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// firstAfter is the first arrival on path at or after t (zero if none).
func firstAfter(u *upstream, path string, t time.Time) time.Time {
	for _, at := range u.Times(path) {
		if !at.Before(t) {
			return at
		}
	}
	return time.Time{}
}

// Rules 8.1 and 8.2: 300 sources on @every 1s, 30 of them in a group
// capped at 2, on three members with cluster.concurrency 30: no source is
// polled twice in a tick, every source is polled every tick once the
// members have shared the shards, at most 30 polls are in flight across
// the cluster and at most 2 of the group's. GET /api/cluster lists the
// three members.
func TestClusterOnePollPerTick(t *testing.T) {
	dsn, _ := pgStore(t)
	u := newUpstream(t)
	var b strings.Builder
	b.WriteString("concurrency: 15\nlimits:\n  g: {concurrency: 2}\ndefaults:\n  schedule: \"@every 1s\"\n  timeout: 5s\nsources:\n")
	var paths []string
	for i := range 300 {
		path, group := fmt.Sprintf("/s/%d", i), ""
		if i < 30 {
			path, group = fmt.Sprintf("/g/%d", i), ", limit: g"
		}
		u.Set(path, behavior{Hold: 10 * time.Millisecond})
		paths = append(paths, path)
		fmt.Fprintf(&b, "  - {name: s%d, type: http, url: \"%s\"%s}\n", i, u.URL(path), group)
	}
	ms := startCluster(t, dsn, 3, 30, b.String())
	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	for _, m := range ms {
		m.d.watchStarvation()
	}
	// stall is the most the machine took from a member from a to b: a
	// member starved that long starts its polls that much late.
	stall := func(a, b time.Time) time.Duration {
		var w time.Duration
		for _, m := range ms {
			w = max(w, m.d.within(0, a, b))
		}
		return w
	}
	settled(t, ms[0], names, "m1", "m2", "m3")
	// skipped is the ticks the members counted as skipped (rule 3.1: a
	// tick that comes while the source's poll runs or waits).
	skipped := func() float64 {
		var n float64
		for _, m := range ms {
			if v, ok := m.d.metrics().value("pacer_polls_total", "outcome", "skipped"); ok {
				n += v
			}
		}
		return n
	}
	from := time.Now().Add(time.Second)
	until := from.Add(12 * time.Second)
	sleepUntil(from)
	skippedFrom := skipped()
	sleepUntil(until)
	skippedIn := skipped() - skippedFrom

	// No tick polled twice. Over the whole run (start and sharing
	// included), a source has at most one poll per tick of its phase: a
	// tick missed while its shard moved is polled late, and the next one
	// on time, so only the count says whether a tick was polled twice.
	// Once shared, two polls less than half a tick apart are a late poll
	// (its start waited for the machine, or for the commit of the poll
	// before it, rule 3.8, on a loaded PostgreSQL) and the next tick's on
	// time: the poll before the late one is then two ticks before the
	// second. A tick polled twice has its polls and the tick's before
	// within about one tick and a half.
	for _, p := range paths {
		ts := u.Times(p)
		if len(ts) < 2 {
			continue
		}
		ticks := int((ts[len(ts)-1].Sub(ts[0]) + 500*time.Millisecond) / time.Second)
		if len(ts) > ticks+1 {
			t.Errorf("%s polled %d times over %d ticks (%s to %s)", p, len(ts), ticks+1, ts[0].Format("15:04:05.000"), ts[len(ts)-1].Format("15:04:05.000"))
		}
		for i := 2; i < len(ts); i++ {
			gap, span := ts[i].Sub(ts[i-1]), ts[i].Sub(ts[i-2])
			if !ts[i-2].Before(from) && gap < 500*time.Millisecond && span < 1500*time.Millisecond-stall(ts[i-2], ts[i]) {
				t.Errorf("%s polled twice within %v (at %s and %s, the poll before at %s)", p, gap,
					ts[i-1].Format("15:04:05.000"), ts[i].Format("15:04:05.000"), ts[i-2].Format("15:04:05.000"))
				break
			}
		}
	}
	// Every tick polled once shared: at most one tick missed over 12 s
	// (the window's edges), no gap of two ticks, but for the ticks the
	// members counted as skipped (on a loaded machine a poll waiting for
	// the commit before it, rule 3.8, lets a tick go by: skipped and
	// counted, as rule 3.1 says): a tick lost without a count fails.
	missed := 0
	var gaps []string
	for _, p := range paths {
		var in []time.Time
		for _, at := range u.Times(p) {
			if !at.Before(from) && at.Before(until) {
				in = append(in, at)
			}
		}
		if len(in) < 11 {
			missed += 11 - len(in)
			gaps = append(gaps, fmt.Sprintf("%s polled %d times in 12 s", p, len(in)))
			continue
		}
		for i := 1; i < len(in); i++ {
			if gap := in[i].Sub(in[i-1]); gap > 1700*time.Millisecond+stall(in[i-1], in[i]) {
				missed += int((gap+300*time.Millisecond)/time.Second) - 1
				gaps = append(gaps, fmt.Sprintf("%s: a gap of %v between polls", p, gap.Round(time.Millisecond)))
			}
		}
	}
	// A member that could not renew its claims in time on a loaded machine
	// stops polling their shards (rule 8.3), and one whose heartbeat came
	// late is counted out and its shards moved, until one takes them back:
	// the ticks missed then are the hand-over's (within 2 x lease, rule
	// 8.1), not a loss; on a quiet machine no shard moves in the window.
	lapsed := 0
	for _, m := range ms {
		log := m.d.stderr.String()
		lapsed += logLinesBetween(log, "cannot renew the claims", from.Add(-2*clusterLease), until) +
			logLinesBetween(log, "shards given up", from.Add(-2*clusterLease), until)
	}
	if float64(missed) > skippedIn && lapsed > 0 {
		t.Logf("%d ticks missed in the window, %v counted as skipped, and %d claim renewals failed or shards moved on the loaded machine meanwhile (rules 8.1, 8.3)", missed, skippedIn, lapsed)
	} else if float64(missed) > skippedIn {
		t.Errorf("%d ticks missed in the window, %v counted as skipped by the members: %s", missed, skippedIn, strings.Join(gaps, "; "))
	} else if missed > 0 {
		t.Logf("%d ticks missed in the window, all of them counted as skipped (%v): %d gaps", missed, skippedIn, len(gaps))
	}
	if peak := u.Peak(); peak > 30 {
		t.Errorf("peak polls in flight across the cluster: %d, want <= cluster.concurrency 30", peak)
	}
	if peak := u.PeakTag("g"); peak > 2 {
		t.Errorf("peak polls of group g in flight: %d, want <= its cap 2", peak)
	}
	t.Logf("peak in flight %d (cap 30), group g %d (cap 2)", u.Peak(), u.PeakTag("g"))

	var cl struct {
		Members []struct {
			Name              string    `json:"name"`
			StartedAt         time.Time `json:"started_at"`
			LastSeenAt        time.Time `json:"last_seen_at"`
			OwnedSources      int       `json:"owned_sources"`
			Inflight          int       `json:"inflight"`
			ConfigFingerprint string    `json:"config_fingerprint"`
			ClockOffsetMs     *int64    `json:"clock_offset_ms"`
		} `json:"members"`
	}
	// Each member's count is the one of its last heartbeat: after a shard
	// moved (a loaded machine) the counts agree again within a lease or so.
	total := 0
	var got []string
	softly(t, 4*clusterLease, "GET /api/cluster: m1, m2 and m3 owning the 300 sources", func() error {
		ms[1].d.getJSON("/api/cluster", &cl)
		total, got = 0, nil
		for _, m := range cl.Members {
			got = append(got, m.Name)
			total += m.OwnedSources
		}
		sort.Strings(got)
		if strings.Join(got, ",") != "m1,m2,m3" || total != 300 {
			return errf("members %v owning %d sources", got, total)
		}
		return nil
	})
	for _, m := range cl.Members {
		if m.ConfigFingerprint == "" || m.ConfigFingerprint != cl.Members[0].ConfigFingerprint || m.StartedAt.IsZero() || m.LastSeenAt.IsZero() {
			t.Errorf("member %+v: same non-empty fingerprint and times expected", m)
		}
		// Rule 8.1: the member's clock against the database's; on one
		// machine, well within a second.
		if m.ClockOffsetMs == nil || *m.ClockOffsetMs > 1000 || *m.ClockOffsetMs < -1000 {
			t.Errorf("member %s: clock_offset_ms %v, want present and within ±1000", m.Name, m.ClockOffsetMs)
		}
	}
	_, metrics := ms[0].d.do(http.MethodGet, "/metrics", "", "")
	if !strings.Contains(string(metrics), "\npacer_cluster_members 3\n") || !strings.Contains(string(metrics), "\npacer_owned_sources ") {
		t.Errorf("metrics of m1 lack pacer_cluster_members 3 or pacer_owned_sources")
	}
	st := ms[2].in.mustCLI("status")
	if !strings.Contains(strings.SplitN(st.stdout, "\n", 2)[0], "OWNER") {
		t.Errorf("pacer status on a cluster has no OWNER column:\n%s", st.stdout)
	}
}

// Rules 8.3 to 8.5: a reset on one member of a source another owns takes
// effect within 2 s; a member killed with kill -9 has its sources polled by
// the others within 2 x lease, an open breaker staying open on the new
// owner; a member stopped with SIGTERM has its sources polled within 2 s
// of its exit.
func TestClusterFailover(t *testing.T) {
	dsn, _ := pgStore(t)
	u := newUpstream(t)
	u.Set("/bad", behavior{Status: 500})
	u.Set("/flaky", behavior{Status: 500})
	var b strings.Builder
	b.WriteString("concurrency: 8\ndefaults:\n  schedule: \"@every 1s\"\n  backoff: {initial: 100ms, max: 1s, multiplier: 2, jitter: 0}\nsources:\n" +
		"  - {name: brk, type: http, url: \"" + u.URL("/bad") + "\", breaker: {failures: 1, cooldown: 1m}, error_after: 0}\n" +
		"  - {name: flaky, type: http, url: \"" + u.URL("/flaky") + "\", error_after: 1}\n")
	names := []string{"brk", "flaky"}
	for i := range 60 {
		fmt.Fprintf(&b, "  - {name: s%d, type: http, url: \"%s\"}\n", i, u.URL(fmt.Sprintf("/s/%d", i)))
		names = append(names, fmt.Sprintf("s%d", i))
	}
	ms := startCluster(t, dsn, 3, 0, b.String())
	byName := map[string]*member{}
	for _, m := range ms {
		byName[m.name] = m
	}
	own := settled(t, ms[0], names, "m1", "m2", "m3")

	// A daemon without the cluster section on the cluster's store is
	// refused (it would poll every source beside the members).
	solo := filepath.Join(ms[0].in.dir, "solo.yaml")
	writeFile(t, solo, "store: \""+dsn+"\"\nadmin: {listen: \""+freeAddr(t)+"\"}\nsources:\n"+
		"  - {name: s0, type: http, url: \""+u.URL("/solo")+"\", schedule: \"@every 1s\"}\n")
	sd := ms[0].in.launch(solo, true)
	if code, exited := sd.wait(10 * time.Second); !exited || code != 1 {
		t.Errorf("a daemon without a cluster section on a cluster's store: exited %v, code %d, want 1:\n%s", exited, code, sd.logs())
	}
	if n := u.Count("/solo"); n != 0 {
		t.Errorf("the refused daemon polled %d times", n)
	}

	// A reset from a member that does not own flaky.
	eventually(t, 10*time.Second, "flaky in error", func() error {
		if o := byName[own["flaky"]].d.source("flaky"); o.State != "error" {
			return errf("flaky: %s", o)
		}
		return nil
	})
	u.Set("/flaky", behavior{})
	var other *member
	for _, m := range ms {
		if m.name != own["flaky"] {
			other = m
			break
		}
	}
	began := time.Now()
	if code, body := other.d.do(http.MethodPost, "/api/sources/flaky/reset", "", ""); code != http.StatusOK {
		t.Fatalf("reset of flaky on %s (owner %s): %d %s", other.name, own["flaky"], code, body)
	}
	eventually(t, 2*time.Second-time.Since(began), "the reset applied by flaky's owner", func() error {
		if o := byName[own["flaky"]].d.source("flaky"); o.State == "error" {
			return errf("flaky on its owner: %s", o)
		}
		return nil
	})
	t.Logf("reset on %s of a source of %s applied within %v", other.name, own["flaky"], time.Since(began).Round(time.Millisecond))
	// The member that does not own flaky shows it as its owner committed it.
	eventually(t, 2*time.Second, "flaky out of error on "+other.name, func() error {
		if o := other.d.source("flaky"); o.State == "error" {
			return errf("flaky on %s: %s", other.name, o)
		}
		return nil
	})

	// kill -9 of brk's owner, once its breaker is open.
	victim := byName[own["brk"]]
	eventually(t, 10*time.Second, "brk's breaker open", func() error {
		if o := victim.d.source("brk"); o.State != "open" {
			return errf("brk: %s", o)
		}
		return nil
	})
	badPolls := u.Count("/bad")
	killed := time.Now()
	victim.d.kill()
	var live []string
	for _, m := range ms {
		if m != victim {
			live = append(live, m.name)
		}
	}
	worst := failoverTime(t, u, own, victim.name, killed, 2*clusterLease+time.Second)
	t.Logf("kill -9 of %s: its sources polled by the others within %v (lease %v)", victim.name, worst.Round(time.Millisecond), clusterLease)
	own = settled(t, byName[live[0]], names, live...)
	if o := byName[own["brk"]].d.source("brk"); o.State != "open" {
		t.Errorf("brk on its new owner %s: %+v, want its breaker still open", own["brk"], o)
	}
	if n := u.Count("/bad"); n != badPolls {
		t.Errorf("brk polled %d times after the take-over; its breaker was open for a minute", n-badPolls)
	}

	// A trigger from the member that does not own brk (rule 8.5): its
	// owner polls it once, past the open breaker, within 2 s.
	var nonOwner *member
	for _, n := range live {
		if n != own["brk"] {
			nonOwner = byName[n]
		}
	}
	trigAt := time.Now()
	if code, body := nonOwner.d.do(http.MethodPost, "/api/sources/brk/trigger", "", ""); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("trigger of brk on %s (owner %s): %d %s", nonOwner.name, own["brk"], code, body)
	}
	eventually(t, 2*time.Second-time.Since(trigAt), "brk polled once by its owner after the trigger", func() error {
		if n := u.Count("/bad"); n != badPolls+1 {
			return errf("%d polls of brk since the trigger", n-badPolls)
		}
		return nil
	})
	t.Logf("trigger on %s of a source of %s polled within %v", nonOwner.name, own["brk"], time.Since(trigAt).Round(time.Millisecond))
	// The probe failed: the breaker is open for another minute, and the
	// trigger ran once.
	never(t, time.Second, "brk polled again after the triggered probe", func() error {
		if n := u.Count("/bad"); n != badPolls+1 {
			return errf("%d polls of brk since the trigger, want 1", n-badPolls)
		}
		return nil
	})

	// SIGTERM of one of the two left.
	stopped := byName[live[0]]
	stopped.d.stop(15 * time.Second)
	exited := stopped.d.exitAt
	worst = failoverTime(t, u, own, stopped.name, exited, 2*time.Second+time.Second)
	t.Logf("SIGTERM of %s: its sources polled within %v of its exit", stopped.name, worst.Round(time.Millisecond))
}

// failoverTime checks that each source gone's sources (as own says) is
// polled within bound of since by another member, and returns the worst
// delay. The sources are on @every 1s: bound includes one tick.
func failoverTime(t *testing.T, u *upstream, own map[string]string, gone string, since time.Time, bound time.Duration) time.Duration {
	t.Helper()
	var paths []string
	for name, o := range own {
		if o == gone && strings.HasPrefix(name, "s") {
			paths = append(paths, "/s/"+strings.TrimPrefix(name, "s"))
		}
	}
	if len(paths) == 0 {
		t.Fatalf("%s owned no plain source: %v", gone, own)
	}
	var worst time.Duration
	eventually(t, bound+2*time.Second, fmt.Sprintf("the %d sources of %s polled again", len(paths), gone), func() error {
		worst = 0
		for _, p := range paths {
			at := firstAfter(u, p, since)
			if at.IsZero() {
				return errf("%s not polled since", filepath.Base(p))
			}
			worst = max(worst, at.Sub(since))
		}
		return nil
	})
	if worst > bound {
		t.Errorf("the sources of %s were polled again %v after it went, want <= %v", gone, worst, bound)
	}
	return worst
}

// pgProxy forwards TCP connections to the test server's unix socket; cut
// closes every connection and refuses new ones until restore (a member
// cut off from its database).
type pgProxy struct {
	ln     net.Listener
	socket string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

// newPGProxy starts a proxy to the server of PACER_TEST_POSTGRES and
// returns it with dsn rewritten to go through it.
func newPGProxy(t *testing.T, dsn string) (*pgProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	dir := q.Get("host")
	if dir == "" {
		t.Fatalf("the test server's URL has no unix socket (host=): %s", dsn)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, socket: filepath.Join(dir, ".s.PGSQL."+port), conns: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = ln.Close(); p.setCut(true) })
	go p.serve()
	q.Del("host")
	u.RawQuery = q.Encode()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("unix", p.socket)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close(); _ = c.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = up.Close(); _ = c.Close() }()
	}
}

// setCut cuts (true) or restores (false) the way to the database.
func (p *pgProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// Rule 8.7 and 8.3: a member cut off from PostgreSQL starts no poll once
// its lease minus the margin has passed, answers 503 on /readyz with the
// reason, and resumes by itself when the database is back.
func TestClusterDatabaseCut(t *testing.T) {
	dsn, _ := pgStore(t)
	proxy, via := newPGProxy(t, dsn)
	u := newUpstream(t)
	var b strings.Builder
	b.WriteString("concurrency: 4\ndefaults:\n  schedule: \"@every 1s\"\nsources:\n")
	var paths []string
	for i := range 10 {
		paths = append(paths, fmt.Sprintf("/s/%d", i))
		fmt.Fprintf(&b, "  - {name: s%d, type: http, url: \"%s\"}\n", i, u.URL(paths[i]))
	}
	ms := startCluster(t, via, 1, 0, b.String())
	u.waitArrivals(t, paths[0], 2, 5*time.Second)
	cut := time.Now()
	proxy.setCut(true)
	// The claims were renewed at most lease/3 before the cut: no poll
	// starts later than the lease minus its quarter after the cut.
	stopBy := cut.Add(clusterLease - clusterLease/4)
	eventually(t, 2*clusterLease, "/readyz 503 naming the claims", func() error {
		code, body := ms[0].d.do(http.MethodGet, "/readyz", "", "")
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "claim") {
			return errf("%d %s", code, body)
		}
		return nil
	})
	sleepUntil(stopBy.Add(3 * time.Second))
	for _, p := range paths {
		for _, at := range u.Times(p) {
			if at.After(stopBy) {
				t.Errorf("%s polled at %s, %v after the database was cut (lease %v)", p, at.Format("15:04:05.000"), at.Sub(cut), clusterLease)
				break
			}
		}
	}
	back := time.Now()
	proxy.setCut(false)
	eventually(t, 3*clusterLease, "polls again once the database is back", func() error {
		for _, p := range paths {
			if firstAfter(u, p, back).IsZero() {
				return errf("%s not polled since", p)
			}
		}
		return nil
	})
	ms[0].d.waitReady(2 * clusterLease)
	t.Logf("cut off: polls stopped within %v; back: all polled again within %v", clusterLease-clusterLease/4, time.Since(back).Round(time.Millisecond))
}

// logLinesBetween counts the lines of a daemon's text log that contain what
// and whose time= lies in [a, b].
func logLinesBetween(log, what string, a, b time.Time) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, what) {
			continue
		}
		i := strings.Index(l, "time=")
		if i < 0 {
			continue
		}
		f := strings.Fields(l[i+len("time="):])
		if len(f) == 0 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, f[0])
		if err == nil && !at.Before(a) && !at.After(b) {
			n++
		}
	}
	return n
}
