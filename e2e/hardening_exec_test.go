package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// Issue 10 item 13 (daemon part): the daemon is a child subreaper, so an
// exec poll leaves nothing running, whatever its outcome: a background
// child (`sleep 301 &`), a grandchild in its own session (`setsid sleep
// 302 &`) of a poll that succeeds, and one of a poll killed at its timeout
// (`setsid sleep 303 &`, which also must not hold the poll's slot past the
// timeout). After SIGTERM nothing marked is left.
func TestExecPollsLeaveNothingRunning(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	mark := newProcMark(t)
	in.writeConfig(fmt.Sprintf(`concurrency: 4
shutdown_timeout: 5s
defaults:
  schedule: "@every 1s"
  timeout: 5s
  backoff: {initial: 1s, max: 1s, jitter: 0}
  breaker: {failures: 0}
  error_after: 0
sources:
  - {name: bg, type: exec, command: [sh, -c, "sleep 301 & echo hi"], env: {%[1]s: %[2]s}}
  - {name: sid, type: exec, command: [sh, -c, "setsid sleep 302 & echo hi"], env: {%[1]s: %[2]s}}
  - {name: slow, type: exec, command: [sh, -c, "setsid sleep 303 & exec sleep 60"], timeout: 1s, env: {%[1]s: %[2]s}}
`, mark.key, mark.value))
	d := in.start()
	eventually(t, 30*time.Second, "three polls of each source", func() error {
		for _, n := range []string{"bg", "sid", "slow"} {
			if o := d.source(n); o.PollsTotal < 3 {
				return errf("%s: %s", n, o)
			}
		}
		return nil
	})

	// Over 4 s (four more rounds) no marked process lives longer than its
	// poll can: the polls of bg and sid end at once, slow's at its 1s
	// timeout.
	const maxLife = 2500 * time.Millisecond
	firstSeen := map[int]time.Time{}
	cmd := map[int]string{}
	var leftovers []string
	never(t, 4*time.Second, "exec leftovers", func() error {
		now := time.Now()
		for pid, c := range mark.scan() {
			if _, ok := firstSeen[pid]; !ok {
				firstSeen[pid], cmd[pid] = now, c
			}
			if now.Sub(firstSeen[pid]) > maxLife {
				leftovers = append(leftovers, fmt.Sprintf("pid %d %q", pid, c))
			}
		}
		if len(leftovers) > 0 {
			return errf("alive for over %s: %v", maxLife, leftovers)
		}
		return nil
	})
	t.Logf("exec leftover figures: %d marked processes seen in 4s of polls, none alive over %s", len(firstSeen), maxLife)
	for _, want := range []string{"sleep 301", "sleep 302", "sleep 303"} {
		seen := false
		for _, c := range cmd {
			seen = seen || c == want
		}
		if !seen {
			t.Logf("no %q caught in flight (they are killed within milliseconds)", want)
		}
	}
	// A poll killed at its timeout ends at the timeout, not timeout + the
	// 2 s that os/exec waits for a process holding its output.
	for _, r := range d.history("slow", 10) {
		if r.Outcome == "failure" && r.DurationMs > 1800 {
			t.Errorf("slow: a poll with timeout 1s took %dms (%s)", r.DurationMs, r.Error)
		}
	}
	d.stop(15 * time.Second)
	softly(t, 2*time.Second, "no marked process after the daemon stopped", func() error {
		if left := mark.scan(); len(left) > 0 {
			return errf("still running: %v", left)
		}
		return nil
	})
}

// Issue 10 item 13, rule 3.10: SIGTERM with shutdown_timeout 2s while a
// poll runs that outlives it (timeout 1m, with a setsid grandchild holding
// its output) and an admin request is in flight: the daemon exits 0 within
// shutdown_timeout + 1 s and leaves nothing running; the poll is recorded
// as interrupted.
func TestShutdownWithinTimeoutDespiteGrandchild(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	mark := newProcMark(t)
	in.writeConfig(fmt.Sprintf(`shutdown_timeout: 2s
sources:
  - {name: stuck, type: exec, schedule: "@every 1s", timeout: 1m, command: [sh, -c, "setsid sleep 304 & exec sleep 60"], env: {%s: %s}}
`, mark.key, mark.value))
	d := in.start()
	d.watchStarvation()
	eventually(t, 20*time.Second, "the poll running with its setsid grandchild", func() error {
		got := mark.scan()
		var cmds []string
		for _, c := range got {
			cmds = append(cmds, c)
		}
		if !slices.Contains(cmds, "sleep 304") || !slices.Contains(cmds, "sleep 60") {
			return errf("marked processes: %v", got)
		}
		return nil
	})
	// An admin request in flight too (its body never arrives): the admin
	// server's grace runs alongside the polls', not before them.
	slow, err := net.Dial("tcp", in.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := fmt.Fprintf(slow, "POST /api/sources/stuck/pause HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"rea", in.addr); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	d.signal(syscall.SIGTERM)
	code, ok := d.wait(15 * time.Second)
	took := time.Since(sent)
	if !ok {
		t.Fatalf("still running 15s after SIGTERM")
	}
	t.Logf("shutdown figures: SIGTERM to exit %s with shutdown_timeout 2s (exit %d)", took.Round(time.Millisecond), code)
	if code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
	if took > d.within(3*time.Second, sent, sent.Add(took)) {
		t.Errorf("SIGTERM to exit took %s; shutdown_timeout is 2s (bound 3s)", took.Round(time.Millisecond))
	}
	softly(t, 2*time.Second, "no marked process after the daemon exited", func() error {
		if left := mark.scan(); len(left) > 0 {
			return errf("still running: %v", left)
		}
		return nil
	})
	r := in.mustCLI("history", "-json", "-n", "5", "stuck")
	if !strings.Contains(r.stdout, `"interrupted"`) {
		t.Errorf("history after the shutdown has no interrupted poll:\n%s", r.stdout)
	}
}

// procMark is an environment entry given to a test's exec sources, so that
// their processes (and all they start, unless they clear their
// environment) are found by a scan of /proc, whatever their parent or
// process group. Its cleanup kills, by pid, whatever still carries it.
type procMark struct {
	key, value string
	entry      []byte
}

func newProcMark(t *testing.T) *procMark {
	m := &procMark{key: "PACER_E2E_MARK", value: strings.ToLower(rand.Text())}
	m.entry = []byte(m.key + "=" + m.value)
	t.Cleanup(func() {
		for pid := range m.scan() {
			if m.has(pid) { // checked again just before: pids are reused
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return m
}

// scan returns the live processes carrying the mark, with their command
// lines (arguments joined by spaces). It reads each process's environ
// once; processes of other users are not readable and not ours.
func (m *procMark) scan() map[int]string {
	out := map[int]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !m.has(pid) || procDead(pid) {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	return out
}

// has reports whether pid's environment holds the mark.
func (m *procMark) has(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return slices.ContainsFunc(bytes.Split(b, []byte{0}), func(kv []byte) bool { return bytes.Equal(kv, m.entry) })
}

// Issue 10 item 12: an upstream's status line holding ESC[2J, 200 NUL bytes
// on a command's stderr and a pause reason with an OSC title sequence are
// stored as seen and shown escaped by `pacer status` and `pacer history`
// (exact in -json, which holds no raw control character).
func TestTerminalEscapesShownSafely(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostile := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = buf.WriteString("HTTP/1.1 503 \x1b[2J\x1b[31mdown\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		_ = buf.Flush()
	})}
	go func() { _ = hostile.Serve(ln) }()
	t.Cleanup(func() { _ = hostile.Close() })

	in := newInst(t)
	in.writeConfig(fmt.Sprintf(`defaults:
  schedule: "@every 1s"
  error_after: 0
sources:
  - {name: web, type: http, url: "http://%s/"}
  - {name: nul, type: exec, command: [sh, -c, "head -c 200 /dev/zero >&2; exit 3"]}
  - {name: calm, type: exec, command: ["true"]}
`, ln.Addr()))
	d := in.start()
	eventually(t, 20*time.Second, "both failing sources polled", func() error {
		for _, n := range []string{"web", "nul"} {
			if o := d.source(n); o.FailuresTotal < 1 {
				return errf("%s: %s", n, o)
			}
		}
		return nil
	})
	in.mustCLI("pause", "calm", "-reason", "maint \x1b]0;owned\a")
	web, nul := d.source("web"), d.source("nul")
	if !strings.Contains(web.LastError, "\x1b[2J") {
		t.Errorf("web: the status line was not stored as seen: %q", web.LastError)
	}
	t.Logf("stored: web %q; nul %q", web.LastError, nul.LastError)

	for _, args := range [][]string{{"status"}, {"status", "web"}, {"history", "web"}, {"history", "nul"}} {
		r := in.mustCLI(args...)
		if i := strings.IndexFunc(r.stdout, termControl); i >= 0 {
			t.Errorf("pacer %v printed raw %U at byte %d:\n%q", args, []rune(r.stdout[i:])[0], i, r.stdout)
		}
		// status clips LAST ERROR to fit 120 columns: the escape's start
		// shows there, the whole text in history.
		want := `\x1b[2J\x1b[31mdown`
		if args[0] == "status" {
			want = `\x1b[2J`
		}
		if (args[len(args)-1] == "web" || args[0] == "status") && !strings.Contains(r.stdout, want) {
			t.Errorf("pacer %v does not show the escape visibly:\n%s", args, r.stdout)
		}
	}
	st := in.mustCLI("status").stdout
	if !strings.Contains(st, `paused: maint \x1b]0;owned\x07`) {
		t.Errorf("status does not show the pause reason escaped:\n%s", st)
	}
	if strings.Contains(nul.LastError, "\x00") && !strings.Contains(st, `\x00`) {
		t.Errorf("nul's last error holds NUL bytes that status does not show:\n%s", st)
	}
	js := in.mustCLI("status", "-json").stdout
	if strings.IndexFunc(js, termControl) >= 0 {
		t.Errorf("status -json printed a raw control character:\n%q", js)
	}
	var objs []sourceObj
	if err := json.Unmarshal([]byte(js), &objs); err != nil {
		t.Fatalf("status -json: %v", err)
	}
	for _, o := range objs {
		if o.Name == "calm" && o.PausedReason != "maint \x1b]0;owned\a" {
			t.Errorf("status -json paused_reason = %q, want it as given", o.PausedReason)
		}
	}
}

// termControl reports whether r is a character a terminal acts on (C0 but
// newline, DEL, C1) or the replacement for invalid UTF-8.
func termControl(r rune) bool {
	return (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError
}
