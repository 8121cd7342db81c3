package bench

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/internal/pgtest"
)

// Benchmarks of a cluster (contract section 8, issue 12): members are
// real `pacer run` processes of the built binary on one PostgreSQL store,
// the server of PACER_TEST_POSTGRES (scripts/postgres.sh starts one; it
// must run on this machine, its processes' CPU is read from /proc). See
// BENCHMARKS.md, "Cluster (issue 12)".
//
//	eval "$(scripts/postgres.sh start)"
//	go test ./bench -run '^$' -bench 'BenchmarkCluster' -benchtime=1x -timeout 30m

// clusterLease is the members' cluster.lease (the minimum, 2 s).
const clusterLease = 2 * time.Second

// postgresCPU returns a function that reads the CPU time used so far by
// the server of dsn: its postmaster (with its reaped children) and every
// live child (backends, writers, checkpointer, autovacuum).
func postgresCPU(b *testing.B, dsn string) func() time.Duration {
	b.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var backend int
	if err := db.QueryRow("SELECT pg_backend_pid()").Scan(&backend); err != nil {
		b.Fatal(err)
	}
	return pgtest.ServerCPU(b, backend)
}

// memberSpec is what a benchmark's member (or single daemon) runs.
type memberSpec struct {
	store    string // a PostgreSQL URL, or "" for pacer.db (SQLite) in its directory
	name     string // cluster.name; "" without a cluster section
	n, k     int    // sources, concurrency
	schedule string
	url      string // the upstream: sources poll url/s/N
}

// runMember writes dir/config.yaml for spec and starts the daemon on it.
func runMember(b *testing.B, bin, dir string, spec memberSpec) (*daemonRun, string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	var sb strings.Builder
	st := spec.store
	if st == "" {
		st = "pacer.db"
	}
	fmt.Fprintf(&sb, "store: %q\nadmin: {listen: %q}\nconcurrency: %d\nshutdown_timeout: 10s\nlog: {level: warn}\n", st, addr, spec.k)
	if spec.name != "" {
		fmt.Fprintf(&sb, "cluster: {name: %s, lease: %s}\n", spec.name, clusterLease)
	}
	fmt.Fprintf(&sb, "defaults: {schedule: %q, timeout: 5s}\nsources:\n", spec.schedule)
	for i := range spec.n {
		fmt.Fprintf(&sb, "  - {name: src-%06d, type: http, url: \"%s/s/%d\"}\n", i, spec.url, i)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	d := startDaemon(b, bin, cfg, addr, 0, 0)
	return d, addr
}

// commits reads the flusher's commits so far (the count of
// pacer_store_commit_seconds) from the daemon at addr.
func commits(b *testing.B, addr string) float64 {
	b.Helper()
	v, n := metricSum(b, addr, "pacer_store_commit_seconds_count ")
	if n == 0 {
		b.Fatalf("no pacer_store_commit_seconds_count in the metrics of %s", addr)
	}
	return v
}

// metricSum sums the values of the lines of the daemon at addr's /metrics
// that start with prefix, and counts them.
func metricSum(b *testing.B, addr, prefix string) (sum float64, lines int) {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				b.Fatal(err)
			}
			sum, lines = sum+v, lines+1
		}
	}
	return sum, lines
}

// window is what one measuring window of a run saw.
type window struct {
	pollsPerSec   float64 // requests served by the upstream per second
	commitsPerSec float64 // the daemons' commits per second, summed
	pgMsPerPoll   float64 // PostgreSQL server CPU per poll, ms (0 without)
}

// measureWindow sleeps warm, then measures for d: the upstream's served
// requests, the commits of the daemons at addrs and the server's CPU (pg
// may be nil).
func measureWindow(b *testing.B, srv *slowServer, addrs []string, pg func() time.Duration, warm, d time.Duration) window {
	b.Helper()
	time.Sleep(warm)
	sum := func() float64 {
		var c float64
		for _, a := range addrs {
			c += commits(b, a)
		}
		return c
	}
	var pg0 time.Duration
	if pg != nil {
		pg0 = pg()
	}
	n0, c0, t0 := srv.served.Load(), sum(), time.Now()
	time.Sleep(d)
	n, c, el := srv.served.Load()-n0, sum()-c0, time.Since(t0)
	w := window{pollsPerSec: float64(n) / el.Seconds(), commitsPerSec: c / el.Seconds()}
	if pg != nil && n > 0 {
		w.pgMsPerPoll = float64(pg()-pg0) / float64(time.Millisecond) / float64(n)
	}
	return w
}

// startCluster starts members of n sources each on a fresh schema of the
// test server and returns them with their admin addresses.
func startCluster(b *testing.B, bin, dir, dsn string, members int, spec memberSpec) ([]*daemonRun, []string) {
	b.Helper()
	ds, addrs := make([]*daemonRun, members), make([]string, members)
	for i := range ds {
		spec.store, spec.name = dsn, fmt.Sprintf("m%d", i+1)
		ds[i], addrs[i] = runMember(b, bin, filepath.Join(dir, spec.name), spec)
	}
	return ds, addrs
}

// BenchmarkClusterSaturated: the upstream is the bottleneck of each member
// (every request held 100 ms, 3,000 sources on "@every 1s" against a
// concurrency of 16: 3,000 polls due a second, 160 possible per member).
// In each round, in this order: a bare bounded client of 3 x 16 (the same
// budget as the cluster), one member alone on SQLite (concurrency 16),
// and a cluster of 3 members of concurrency 16 on one PostgreSQL. It
// reports the aggregate polls/s of each, cluster/single (target >= 2.5),
// cluster/bare, the cluster's commits/s and the server's CPU per 1,000
// polls (target <= 200 ms, i.e. 0.2 ms per poll). Medians of
// PACER_BENCH_ROUNDS rounds (default 3) of PACER_BENCH_WINDOW (10s).
func BenchmarkClusterSaturated(b *testing.B) {
	const members, k, n = 3, 16, 3000
	server := pgtest.Server(b)
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	win := EnvDuration("PACER_BENCH_WINDOW", 10*time.Second)
	srv := newSlowServer(b, 100*time.Millisecond)
	dir := b.TempDir()
	bin := buildPacer(b, dir)
	pg := postgresCPU(b, server)
	var bare, single, cluster, toSingle, toBare, commitsS, pgMs []float64
	for r := range rounds {
		stop := make(chan struct{})
		wait := bareClient(members*k, srv.URL, stop)
		bw := measureWindow(b, srv, nil, nil, 2*time.Second, win)
		close(stop)
		wait()

		spec := memberSpec{n: n, k: k, schedule: "@every 1s", url: srv.URL}
		d, addr := runMember(b, bin, filepath.Join(dir, fmt.Sprintf("single-%d", r)), spec)
		sw := measureWindow(b, srv, []string{addr}, nil, 3*time.Second, win)
		d.stop(b)

		dsn := pgtest.Schema(b, "bench_")
		ds, addrs := startCluster(b, bin, filepath.Join(dir, fmt.Sprintf("cluster-%d", r)), dsn, members, spec)
		cw := measureWindow(b, srv, addrs, pg, 5*time.Second, win)
		for _, d := range ds {
			d.stop(b)
		}
		bare, single, cluster = append(bare, bw.pollsPerSec), append(single, sw.pollsPerSec), append(cluster, cw.pollsPerSec)
		toSingle, toBare = append(toSingle, cw.pollsPerSec/sw.pollsPerSec), append(toBare, cw.pollsPerSec/bw.pollsPerSec)
		commitsS, pgMs = append(commitsS, cw.commitsPerSec), append(pgMs, cw.pgMsPerPoll)
		b.Logf("round %d: bare %d: %.0f polls/s | one member on SQLite (k %d): %.0f polls/s, %.1f commits/s | cluster of %d (k %d each): %.0f polls/s, %.1f commits/s, PostgreSQL %.3f ms CPU/poll | cluster/single %.2f, cluster/bare %.2f",
			r+1, members*k, bw.pollsPerSec, k, sw.pollsPerSec, sw.commitsPerSec, members, k, cw.pollsPerSec, cw.commitsPerSec, cw.pgMsPerPoll,
			cw.pollsPerSec/sw.pollsPerSec, cw.pollsPerSec/bw.pollsPerSec)
	}
	b.ReportMetric(Median(bare), "bare-polls/s")
	b.ReportMetric(Median(single), "single-polls/s")
	b.ReportMetric(Median(cluster), "cluster-polls/s")
	b.ReportMetric(Median(toSingle), "cluster/single")
	b.ReportMetric(Median(toBare), "cluster/bare")
	b.ReportMetric(Median(commitsS), "cluster-commits/s")
	b.ReportMetric(1000*Median(pgMs), "pg-cpu-ms/1000polls")
}

// BenchmarkClusterMinuteLoad: 30,000 sources on "@every 1m" (500 polls
// due a second, upstream answers after 10 ms) on a cluster of 3 members of
// concurrency 64 on one PostgreSQL: the aggregate polls/s, the commits/s
// and the server's CPU per 1,000 polls (target <= 200 ms), over a window of
// PACER_BENCH_WINDOW (default 60s: every source once), medians of
// PACER_BENCH_ROUNDS (default 1); and, before it, the server's CPU per
// second for the same three members at rest (one source on "@every 1h"):
// the heartbeats and claims alone.
func BenchmarkClusterMinuteLoad(b *testing.B) {
	const members, k, n = 3, 64, 30_000
	server := pgtest.Server(b)
	rounds := EnvInt("PACER_BENCH_ROUNDS", 1)
	win := EnvDuration("PACER_BENCH_WINDOW", time.Minute)
	srv := newSlowServer(b, 10*time.Millisecond)
	dir := b.TempDir()
	bin := buildPacer(b, dir)
	pg := postgresCPU(b, server)
	var polls, commitsS, pgMs, rest []float64
	for r := range rounds {
		// At rest: the same cluster with one source on "@every 1h": what
		// the heartbeats, the claims and the owners' reads cost the
		// server without polls.
		idle := memberSpec{n: 1, k: k, schedule: "@every 1h", url: srv.URL}
		ds, _ := startCluster(b, bin, filepath.Join(dir, fmt.Sprintf("rest-%d", r)), pgtest.Schema(b, "bench_"), members, idle)
		time.Sleep(5 * time.Second)
		pg0, t0 := pg(), time.Now()
		time.Sleep(10 * time.Second)
		rest = append(rest, float64(pg()-pg0)/float64(time.Millisecond)/time.Since(t0).Seconds())
		for _, d := range ds {
			d.stop(b)
		}
		spec := memberSpec{n: n, k: k, schedule: "@every 1m", url: srv.URL}
		ds, addrs := startCluster(b, bin, filepath.Join(dir, fmt.Sprintf("cluster-%d", r)), pgtest.Schema(b, "bench_"), members, spec)
		w := measureWindow(b, srv, addrs, pg, 10*time.Second, win)
		for _, d := range ds {
			d.stop(b)
		}
		polls, commitsS, pgMs = append(polls, w.pollsPerSec), append(commitsS, w.commitsPerSec), append(pgMs, w.pgMsPerPoll)
		b.Logf("round %d: %.0f polls/s (due %.0f), %.1f commits/s, PostgreSQL %.3f ms CPU/poll; at rest (3 members, no polls) %.1f ms CPU/s",
			r+1, w.pollsPerSec, float64(n)/60, w.commitsPerSec, w.pgMsPerPoll, rest[r])
	}
	b.ReportMetric(Median(rest), "pg-cpu-ms/s-at-rest")
	b.ReportMetric(Median(polls), "polls/s")
	b.ReportMetric(Median(commitsS), "commits/s")
	b.ReportMetric(1000*Median(pgMs), "pg-cpu-ms/1000polls")
}

// recorder is an upstream that records every arrival's time per path.
type recorder struct {
	at chan map[string][]time.Time // a one-slot lock around the map
}

func newRecorder(b *testing.B) (*recorder, string) {
	rc := &recorder{at: make(chan map[string][]time.Time, 1)}
	rc.at <- map[string][]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := <-rc.at
		m[r.URL.Path] = append(m[r.URL.Path], time.Now())
		rc.at <- m
		_, _ = io.WriteString(w, "ok\n")
	}))
	b.Cleanup(srv.Close)
	return rc, srv.URL
}

// firstAfter is the first arrival on path after t (zero if none yet).
func (rc *recorder) firstAfter(path string, t time.Time) time.Time {
	m := <-rc.at
	defer func() { rc.at <- m }()
	for _, at := range m[path] {
		if at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// ownedBy lists the sources the member at addr polls itself (its source
// objects whose owner is name).
func ownedBy(b *testing.B, addr, name string) []string {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/api/sources")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var list []struct {
		Name  string  `json:"name"`
		Owner *string `json:"owner"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, o := range list {
		if o.Owner != nil && *o.Owner == name {
			out = append(out, o.Name)
		}
	}
	return out
}

// BenchmarkClusterFailover: 300 sources on "@every 1s" on 3 members with
// cluster.lease 2s; a member is killed with kill -9 (the first, then the
// second, ...), and the time from the kill to the first poll by another
// member of the last of its sources is measured (all of its sources taken
// over and polled); the member is then restarted under a new name and the
// cluster left to settle. It reports the median and the worst of
// PACER_BENCH_KILLS kills (default 10), and the median over the lease
// (target <= 2).
func BenchmarkClusterFailover(b *testing.B) {
	const members, k, n = 3, 16, 300
	kills := EnvInt("PACER_BENCH_KILLS", 10)
	rc, url := newRecorder(b)
	dir := b.TempDir()
	bin := buildPacer(b, dir)
	dsn := pgtest.Schema(b, "bench_")
	spec := memberSpec{store: dsn, n: n, k: k, schedule: "@every 1s", url: url}
	ds, addrs := make([]*daemonRun, members), make([]string, members)
	names := make([]string, members)
	for i := range ds {
		names[i] = fmt.Sprintf("m%d-0", i+1)
		spec.name = names[i]
		ds[i], addrs[i] = runMember(b, bin, filepath.Join(dir, names[i]), spec)
	}
	defer func() {
		for _, d := range ds {
			d.stop(b)
		}
	}()
	var took []time.Duration
	var ratio []float64
	for kill := range kills {
		time.Sleep(4*clusterLease + 2*time.Second) // settled: the shards shared
		i := kill % members
		owned := ownedBy(b, addrs[i], names[i])
		if len(owned) == 0 {
			b.Fatalf("kill %d: %s owns no source", kill, names[i])
		}
		at := time.Now()
		_ = ds[i].cmd.Process.Kill()
		_ = ds[i].cmd.Wait()
		deadline := at.Add(5 * clusterLease)
		var worst time.Duration
		for _, name := range owned {
			path := "/s/" + strings.TrimLeft(strings.TrimPrefix(name, "src-"), "0")
			if path == "/s/" {
				path = "/s/0"
			}
			first := rc.firstAfter(path, at)
			for ; first.IsZero(); first = rc.firstAfter(path, at) {
				if time.Now().After(deadline) {
					b.Fatalf("kill %d: %s (of %s) not polled within %v of the kill", kill, name, names[i], 5*clusterLease)
				}
				time.Sleep(20 * time.Millisecond)
			}
			worst = max(worst, first.Sub(at))
		}
		took, ratio = append(took, worst), append(ratio, float64(worst)/float64(clusterLease))
		b.Logf("kill %d of %s (%d sources): all polled by the others within %v (%.2f x lease)", kill+1, names[i], len(owned), worst.Round(time.Millisecond), float64(worst)/float64(clusterLease))
		names[i] = fmt.Sprintf("m%d-%d", i+1, kill+1)
		spec.name = names[i]
		ds[i], addrs[i] = runMember(b, bin, filepath.Join(dir, names[i]), spec)
	}
	ms := make([]float64, len(took))
	for i, d := range took {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	b.ReportMetric(Median(ms), "failover-ms-median")
	b.ReportMetric(float64(Percentile(took, 1))/float64(time.Millisecond), "failover-ms-max")
	b.ReportMetric(Median(ratio), "failover/lease")
}
