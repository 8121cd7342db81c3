package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Section 2: CRON_TZ time zones work on a host without tzdata. The daemon
// runs in a mount namespace where every zoneinfo directory Go looks at is
// hidden by an empty tmpfs.
func TestCronTZWithoutTzdata(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	in.writeConfig(`sources:
  - {name: ktm, type: http, url: "http://127.0.0.1:1/k", schedule: "CRON_TZ=Asia/Kathmandu 0 0 * * * *"}
  - {name: nfl, type: http, url: "http://127.0.0.1:1/n", schedule: "CRON_TZ=America/St_Johns 0 0 * * *"}
`)
	var dirs []string
	for _, d := range []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ", "/etc/zoneinfo",
		filepath.Join(runtime.GOROOT(), "lib", "time")} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	script := ""
	for _, d := range dirs {
		script += "mount -t tmpfs tmpfs '" + d + "' && "
	}
	hide := []string{"unshare", "-m", "sh", "-c", script + `exec "$0" "$@"`}
	probe := exec.Command(hide[0], append(hide[1:], "sh", "-c", "cat "+strings.Join(dirs, "/* ")+"/* 2>/dev/null | wc -c")...)
	probe.Env = baseEnv(nil)
	out, err := probe.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		// No mount namespace here (not root): the binary must embed the
		// time zone database instead.
		t.Logf("cannot hide tzdata (%v: %s); checking that the binary embeds time/tzdata", err, out)
		deps, err := exec.Command("go", "list", "-deps", "github.com/pacer-dev/pacer").Output()
		if err != nil {
			t.Fatalf("go list -deps: %v", err)
		}
		if !strings.Contains(string(deps), "time/tzdata\n") {
			t.Errorf("pacer does not embed time/tzdata: CRON_TZ cannot work on a host without tzdata")
		}
		return
	}
	env := []string{"ZONEINFO="}
	in.env = env
	vr := func() cliResult {
		cmd := exec.Command(hide[0], append(hide[1:], pacerBin, "validate", "-config", in.cfgPath)...)
		cmd.Env = baseEnv(env)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		res := cliResult{stdout: o.String(), stderr: e.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			res.code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("validate without tzdata: %v", err)
		}
		return res
	}()
	if vr.code != 0 {
		t.Fatalf("validate with CRON_TZ on a host without tzdata: %s", vr)
	}
	in.wrap = hide
	d := in.start()
	all := d.sources()
	if o := all["ktm"]; o.NextRunAt == nil || o.NextRunAt.Minute() != 15 || o.NextRunAt.Second() != 0 {
		t.Errorf("ktm (hourly at :00 in Asia/Kathmandu, UTC+5:45): next_run_at %s, want minute 15 UTC", fmtTime(o.NextRunAt))
	}
	if o := all["nfl"]; o.NextRunAt == nil || o.NextRunAt.Minute() != 30 || o.NextRunAt.Second() != 0 ||
		(o.NextRunAt.Hour() != 2 && o.NextRunAt.Hour() != 3) {
		t.Errorf("nfl (daily at midnight in America/St_Johns): next_run_at %s, want 02:30 or 03:30 UTC", fmtTime(o.NextRunAt))
	}
}

// Section 2 with 100,000 sources, as a functional test (how fast they load
// and what they cost is BENCHMARKS.md's, measured by bench/): every source
// is loaded and shown by the API; each one's first tick lies within the
// first hour after loading (@every 1h), the ticks spread over that hour;
// and the sources due in the next seconds are polled at their next_run_at,
// none before it. Not parallel: its start-up would disturb the timing of
// the other tests.
func TestHundredThousandSources(t *testing.T) {
	u := newUpstream(t)
	in := newInst(t)
	var b strings.Builder
	b.WriteString("concurrency: 16\nshutdown_timeout: 5s\nsources:\n")
	const n = 100000
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: s%06d, type: http, url: \"%s/m/%d\", schedule: \"@every 1h\", timeout: 5s}\n", i, u.srv.URL, i)
	}
	in.writeConfig(b.String())
	d := in.spawn()
	d.waitReady(60 * time.Second)
	ready := time.Now()
	t.Logf("100,000 sources: ready after %s", ready.Sub(d.started).Round(time.Millisecond))

	var list []sourceObj
	d.getJSON("/api/sources", &list)
	listedAt := time.Now()
	if len(list) != n {
		t.Fatalf("GET /api/sources: %d sources, want %d", len(list), n)
	}
	next := make(map[string]time.Time, n) // pending sources' first ticks
	perMinute := make([]int, 62)
	for _, o := range list {
		phase, err := firstTick(o, d.started, ready)
		if err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		if _, dup := next[o.Name]; dup || o.Type != "http" || o.Schedule != "@every 1h" {
			t.Fatalf("source listed twice or wrong: %s", o)
		}
		if o.PollsTotal == 0 {
			next[o.Name] = phase
		} else {
			next[o.Name] = time.Time{} // polled already: not due again for an hour
		}
		perMinute[int(phase.Sub(d.started)/time.Minute)]++
	}
	// Spread: every whole minute of the hour holds about n/60 first ticks
	// (the first and the last minute are cut by the loading time).
	for m := 1; m < 59; m++ {
		if c := perMinute[m]; c < n/120 || c > n/40 {
			t.Errorf("minute %d of the first hour holds %d first ticks, want about %d: the ticks do not spread (%v)", m, c, n/60, perMinute)
			break
		}
	}

	// The sources due in the next few seconds: each polled once at its time.
	from, to := listedAt.Add(300*time.Millisecond), listedAt.Add(3*time.Second)
	var due []string
	for name, at := range next {
		if !at.Before(from) && at.Before(to) {
			due = append(due, name)
		}
	}
	if len(due) < 10 {
		t.Fatalf("only %d sources due between %s and %s; want about %d", len(due), from.Format("15:04:05.000"), to.Format("15:04:05.000"), n*27/36000)
	}
	eventually(t, time.Until(to)+5*time.Second, "every due source polled", func() error {
		for _, name := range due {
			if u.Count(sourcePath(name)) == 0 {
				return errf("%s (due at %s) not polled yet", name, next[name].Format("15:04:05.000"))
			}
		}
		return nil
	})
	// None early: every request since the list came from a source whose
	// tick had come (sources polled before the list are not due again).
	checked := 0
	for name, at := range next {
		for _, a := range u.Arrivals(sourcePath(name)) {
			if a.At.Before(listedAt) {
				continue
			}
			checked++
			if at.IsZero() || a.At.Before(at.Add(-20*time.Millisecond)) {
				t.Errorf("%s polled at %s, before its next_run_at %s", name, a.At.Format("15:04:05.000"), fmtTime(&at))
			}
		}
	}
	if checked < len(due) {
		t.Errorf("%d polls checked for %d due sources", checked, len(due))
	}
	d.stop(20 * time.Second)
}

// firstTick is the first tick of a source on "@every 1h" as the API shows
// it: its next_run_at while pending, its last run once polled. It must lie
// within the first hour after loading, which happened between started and
// ready.
func firstTick(o sourceObj, started, ready time.Time) (time.Time, error) {
	var phase time.Time
	switch {
	case o.State == "pending" && o.PollsTotal == 0 && o.NextRunAt != nil:
		phase = *o.NextRunAt
	case o.State == "ok" && o.LastRunAt != nil && o.NextRunAt != nil:
		phase = *o.LastRunAt
	default:
		return phase, fmt.Errorf("neither pending with a next_run_at nor polled once and ok")
	}
	if phase.Before(started.Add(-time.Millisecond)) || phase.After(ready.Add(time.Hour)) {
		return phase, fmt.Errorf("first tick %s is not within the first hour after loading (%s to %s)",
			phase.Format(time.RFC3339Nano), started.Format(time.RFC3339Nano), ready.Add(time.Hour).Format(time.RFC3339Nano))
	}
	return phase, nil
}

// sourcePath is the upstream path of source sNNNNNN.
func sourcePath(name string) string {
	i, _ := strconv.Atoi(strings.TrimPrefix(name, "s"))
	return "/m/" + strconv.Itoa(i)
}

// notifyListener collects the datagrams a daemon sends to NOTIFY_SOCKET.
type notifyListener struct {
	path string
	mu   sync.Mutex
	msgs []notifyMsg
}

type notifyMsg struct {
	at   time.Time
	text string
}

func newNotifyListener(t *testing.T) *notifyListener {
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	nl := &notifyListener{path: filepath.Join(dir, "notify.sock")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nl.path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %s: %v", nl.path, err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			nl.mu.Lock()
			nl.msgs = append(nl.msgs, notifyMsg{at: time.Now(), text: string(buf[:n])})
			nl.mu.Unlock()
		}
	}()
	return nl
}

func (nl *notifyListener) all() []notifyMsg {
	nl.mu.Lock()
	defer nl.mu.Unlock()
	return append([]notifyMsg(nil), nl.msgs...)
}

// find returns the first message after since with the line want ("READY=1") after since has the line want ("READY=1")
// or, when want ends with "=", a line starting with it.
func (nl *notifyListener) find(since time.Time, want string) (notifyMsg, bool) {
	for _, m := range nl.all() {
		if m.at.Before(since) {
			continue
		}
		for _, l := range strings.Split(m.text, "\n") {
			if l == want || (strings.HasSuffix(want, "=") && strings.HasPrefix(l, want)) {
				return m, true
			}
		}
	}
	return notifyMsg{}, false
}

func (nl *notifyListener) texts() string {
	var b strings.Builder
	for _, m := range nl.all() {
		fmt.Fprintf(&b, "%s %q\n", m.at.Format("15:04:05.000"), m.text)
	}
	return b.String()
}

func monotonicUsec(t testing.TB) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatalf("clock_gettime: %v", err)
	}
	return ts.Nano() / 1000
}

// Section 7: systemd notifications and the watchdog.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	nl := newNotifyListener(t)
	in := newInst(t)
	in.env = []string{"NOTIFY_SOCKET=" + nl.path, "WATCHDOG_USEC=1000000"}
	in.writeConfig(`shutdown_timeout: 2s
sources:
  - {name: ok, type: http, url: "` + u.URL("/ok") + `", schedule: "@every 1s"}
`)
	d := in.start()
	d.watchStarvation()
	eventually(t, 2*time.Second, "READY=1 and a STATUS= line", func() error {
		if _, ok := nl.find(d.started, "READY=1"); !ok {
			return errf("got:\n%s", nl.texts())
		}
		if _, ok := nl.find(d.started, "STATUS="); !ok {
			return errf("got:\n%s", nl.texts())
		}
		return nil
	})
	// WATCHDOG=1 every 500ms (half of WATCHDOG_USEC).
	w0 := time.Now()
	sleepUntil(w0.Add(3 * time.Second))
	var pings []time.Time
	for _, m := range nl.all() {
		if !m.at.Before(w0) && strings.Contains("\n"+m.text+"\n", "\nWATCHDOG=1\n") {
			pings = append(pings, m.at)
		}
	}
	if len(pings) < 4 {
		t.Errorf("%d WATCHDOG=1 in 3s with WATCHDOG_USEC=1s; want one every 500ms:\n%s", len(pings), nl.texts())
	}
	for i := 1; i < len(pings); i++ {
		// Every 500 ms; what systemd enforces is one within WATCHDOG_USEC
		// (1 s): a gap past it (plus the machine's stall) would get the
		// service killed.
		if gap := pings[i].Sub(pings[i-1]); gap > d.within(time.Second, pings[i-1], pings[i]) {
			t.Errorf("WATCHDOG=1 pings %s apart; want every 500ms", gap.Round(time.Millisecond))
		}
	}

	// SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1.
	hupAt := time.Now()
	mono := monotonicUsec(t)
	d.signal(syscall.SIGHUP)
	eventually(t, 3*time.Second, "RELOADING=1 with MONOTONIC_USEC= then READY=1", func() error {
		m, ok := nl.find(hupAt, "RELOADING=1")
		if !ok {
			return errf("no RELOADING=1:\n%s", nl.texts())
		}
		usec := int64(-1)
		for _, l := range strings.Split(m.text, "\n") {
			if v, ok := strings.CutPrefix(l, "MONOTONIC_USEC="); ok {
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if usec < mono-1_000_000 || usec > mono+5_000_000 {
			return errf("RELOADING=1 without a MONOTONIC_USEC= near %d: %q", mono, m.text)
		}
		if _, ok := nl.find(m.at, "READY=1"); !ok {
			return errf("no READY=1 after RELOADING=1:\n%s", nl.texts())
		}
		return nil
	})
	// SIGTERM: STOPPING=1.
	stopAt := time.Now()
	d.stop(10 * time.Second)
	eventually(t, time.Second, "STOPPING=1", func() error {
		if _, ok := nl.find(stopAt, "STOPPING=1"); !ok {
			return errf("got:\n%s", nl.texts())
		}
		return nil
	})

	// WATCHDOG_PID naming another process: no keep-alives.
	nl2 := newNotifyListener(t)
	in2 := newInst(t)
	in2.env = []string{"NOTIFY_SOCKET=" + nl2.path, "WATCHDOG_USEC=400000", "WATCHDOG_PID=1"}
	in2.writeConfig(`sources:
  - {name: ok, type: http, url: "` + u.URL("/ok2") + `", schedule: "@every 1s"}
`)
	d2 := in2.start()
	never(t, 1500*time.Millisecond, "WATCHDOG_PID names another process: no WATCHDOG=1", func() error {
		if m, ok := nl2.find(d2.started, "WATCHDOG=1"); ok {
			return errf("got %q", m.text)
		}
		return nil
	})
}

// Section 7: the concurrency cap never exceeds what RLIMIT_NOFILE allows.
func TestDescriptorLimitClamp(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.wrap = []string{"sh", "-c", `ulimit -Sn 256 && ulimit -Hn 256 && exec "$0" "$@"`}
	in.writeConfig(`concurrency: 1000
sources:
  - {name: ok, type: http, url: "` + u.URL("/ok") + `", schedule: "@every 1s"}
`)
	d := in.start()
	limit := d.metric("pacer_concurrency_limit")
	if limit >= 1000 || limit < 1 || limit > 256 {
		t.Errorf("pacer_concurrency_limit = %v with concurrency 1000 and RLIMIT_NOFILE 256", limit)
	}
	logs := d.logs()
	if !anyLine(strings.Split(logs, "\n"), func(l string) bool {
		return strings.Contains(l, "1000") && strings.Contains(l, "256")
	}) {
		t.Errorf("no log line with both numbers (concurrency 1000, RLIMIT_NOFILE 256):\n%s", logs)
	}
	u.waitArrivals(t, "/ok", 2, 4*time.Second)
}
