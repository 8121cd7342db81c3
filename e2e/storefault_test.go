package e2e

// Store faults at daemon level (README "Design: store"; contract rules 3.1
// and 3.8, section 5 /readyz, section 6 pacer_store_errors_total), against
// the real binary:
//
//   - read-only: the SQLite file and its WAL become immutable while the
//     daemon runs (chattr +i). The tests run as root, and root ignores file
//     modes, so chmod would change nothing; the immutable attribute is
//     enforced for root too, and for descriptors that are already open
//     (ext4 and tmpfs check it on every write). The -shm file is left
//     alone: it is mapped into memory, and a write fault on an immutable
//     mapping is a SIGBUS, not a failed write.
//   - locked: another process holds SQLite's write lock (BEGIN IMMEDIATE)
//     for 10 s, longer than the daemon's 5 s busy timeout. The other
//     process is this test binary run again as a helper (init below) that
//     opens the file with database/sql and mattn/go-sqlite3.
//   - full: the store lives on an 8 MiB tmpfs mounted in a private mount
//     namespace (unshare -m), held by a helper process; the daemon runs in
//     that namespace (nsenter -m), and the test fills the file system
//     through /proc/HELPER/root until write returns ENOSPC, so that SQLite's
//     writes fail with SQLITE_FULL. (PRAGMA max_page_count is per
//     connection: another connection cannot make the daemon's fail.)
//
// In each case the daemon must stay up, keep the global bound (upstream
// peak <= concurrency), answer 503 on /readyz with the reason, count
// pacer_store_errors_total, and once the fault clears commit every state
// change that happened meanwhile: after a graceful stop the store holds
// exactly what the API showed.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the helper's own connection to the store
)

// Helper modes of this test binary, chosen by $PACER_E2E_STORE_HELPER.
const (
	helperEnv   = "PACER_E2E_STORE_HELPER"
	helperLock  = "lock"  // hold the write lock of $PACER_E2E_DB for $PACER_E2E_HOLD
	helperMount = "mount" // mount a tmpfs of $PACER_E2E_SIZE on $PACER_E2E_DIR, then wait for EOF on stdin
)

// init runs the helper modes before TestMain builds anything.
func init() {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case helperLock:
		os.Exit(lockHelper(os.Getenv("PACER_E2E_DB"), os.Getenv("PACER_E2E_HOLD")))
	case helperMount:
		os.Exit(mountHelper(os.Getenv("PACER_E2E_DIR"), os.Getenv("PACER_E2E_SIZE")))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode")
		os.Exit(2)
	}
}

// lockHelper takes SQLite's write lock on path, says "locked", holds it for
// hold, commits and exits.
func lockHelper(path, hold string) int { return holdWriteLock(path, hold, nil) }

// holdWriteLock opens the SQLite store at path, runs before (if any) on its
// connection, takes the write lock (BEGIN IMMEDIATE), says "locked", holds
// it for hold, commits and returns the helper's exit code.
func holdWriteLock(path, hold string, before func(ctx context.Context, conn *sql.Conn) int) int {
	d, err := time.ParseDuration(hold)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		return 2
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=20000")
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conn:", err)
		return 1
	}
	defer conn.Close()
	if before != nil {
		if code := before(ctx, conn); code != 0 {
			return code
		}
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		fmt.Fprintln(os.Stderr, "begin immediate:", err)
		return 1
	}
	fmt.Println("locked")
	time.Sleep(d) // holding the lock is the helper's whole job
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		fmt.Fprintln(os.Stderr, "commit:", err)
		return 1
	}
	return 0
}

// mountHelper runs in a private mount namespace: it mounts a tmpfs of size
// on dir, says "mounted", and keeps the namespace alive until its standard
// input closes (the test ends, or dies).
func mountHelper(dir, size string) int {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		fmt.Fprintln(os.Stderr, "mount tmpfs:", err)
		return 1
	}
	fmt.Println("mounted")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// helper starts this binary in a helper mode (argv0 wraps it, e.g. unshare)
// and waits for its first line of output. Closing stdin ends a mount helper.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when it has exited, with err set
	err   error
}

func startHelper(t *testing.T, wrap []string, env []string, want string) *helper {
	t.Helper()
	argv := append(append([]string(nil), wrap...), os.Args[0], "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper %v: %v", argv, err)
	}
	h := &helper{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		h.err = cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-h.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-h.done
		}
	})
	select {
	case l := <-lines:
		if l != want {
			t.Fatalf("helper said %q, want %q", l, want)
		}
	case <-h.done:
		t.Fatalf("helper %v exited before it was ready: %v", argv, h.err)
	case <-time.After(20 * time.Second):
		t.Fatalf("helper %v not ready after 20s", argv)
	}
	return h
}

// storeFault is one way to break the store and mend it.
type storeFault struct {
	name string
	// storeDir is where the store lives, relative to the config ("" = the
	// config's directory).
	storeDir string
	// setup runs before the daemon starts; it may set in.wrap and return a
	// runner for CLI commands that must see the store as the daemon does.
	setup func(t *testing.T, in *inst) (cli func(args ...string) cliResult)
	// inject breaks the store of the running daemon; clear mends it.
	inject func(t *testing.T, in *inst, dbPath string)
	clear  func(t *testing.T, in *inst, dbPath string)
	// reason is a word the /readyz reason must contain.
	reason []string
	// lasts, when > 0, is how long the fault lasts by itself: what must
	// happen during the fault must happen before then.
	lasts time.Duration
}

// chattr sets or clears the immutable attribute of the files.
func chattr(t *testing.T, flag string, files ...string) {
	t.Helper()
	args := append([]string{flag}, files...)
	if out, err := exec.Command("chattr", args...).CombinedOutput(); err != nil {
		t.Fatalf("chattr %v: %v\n%s", args, err, out)
	}
}

// mustNotWrite proves that a write to path fails now, as root, through an
// already-open descriptor.
func mustNotWrite(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		_, err = w.WriteAt([]byte{}, 0)
		w.Close()
		t.Fatalf("fault not injected: root can still open %s for writing", path)
	}
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("opening %s for writing: %v, want EPERM", path, err)
	}
}

func storeFaults() []storeFault {
	var holder *helper
	var lock *helper
	return []storeFault{
		{
			name: "ReadOnly",
			inject: func(t *testing.T, in *inst, db string) {
				files := []string{db, db + "-wal"}
				t.Cleanup(func() { _ = exec.Command("chattr", append([]string{"-i"}, files...)...).Run() })
				chattr(t, "+i", files...)
				for _, f := range files {
					mustNotWrite(t, f)
				}
			},
			clear: func(t *testing.T, in *inst, db string) {
				chattr(t, "-i", db, db+"-wal")
			},
			reason: []string{"store"},
		},
		{
			name: "Locked",
			inject: func(t *testing.T, in *inst, db string) {
				lock = startHelper(t, nil, []string{helperEnv + "=" + helperLock, "PACER_E2E_DB=" + db, "PACER_E2E_HOLD=10s"}, "locked")
			},
			clear: func(t *testing.T, in *inst, db string) {
				// The helper commits after its 10 s.
				select {
				case <-lock.done:
					if lock.err != nil {
						t.Fatalf("lock helper: %v", lock.err)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("the lock helper did not finish")
				}
			},
			reason: []string{"store"},
			lasts:  10 * time.Second,
		},
		{
			name:     "Full",
			storeDir: "data",
			setup: func(t *testing.T, in *inst) func(args ...string) cliResult {
				dir := filepath.Join(in.dir, "data")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				holder = startHelper(t, []string{"unshare", "-m", "--propagation", "private"},
					[]string{helperEnv + "=" + helperMount, "PACER_E2E_DIR=" + dir, "PACER_E2E_SIZE=8m"}, "mounted")
				ns := []string{"nsenter", "-t", strconv.Itoa(holder.cmd.Process.Pid), "-m", "--"}
				in.wrap = ns
				return func(args ...string) cliResult {
					full := append(append(append([]string(nil), ns...), pacerBin, args[0], "-config", in.cfgPath), args[1:]...)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					cmd := exec.CommandContext(ctx, full[0], full[1:]...)
					cmd.Dir, cmd.Env = in.cwd, baseEnv(in.env)
					var o, e strings.Builder
					cmd.Stdout, cmd.Stderr = &o, &e
					err := cmd.Run()
					r := cliResult{stdout: o.String(), stderr: e.String()}
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						r.code = ee.ExitCode()
					} else if err != nil {
						t.Fatalf("%v: %v", full, err)
					}
					return r
				}
			},
			inject: func(t *testing.T, in *inst, db string) {
				// Fill the tmpfs, seen through the helper's root.
				fill := filepath.Join(fmt.Sprintf("/proc/%d/root", holder.cmd.Process.Pid), in.dir, "data", "fill")
				f, err := os.Create(fill)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				buf := make([]byte, 64<<10)
				for {
					if _, err = f.Write(buf); err != nil {
						break
					}
				}
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
				}
				_ = f.Sync()
			},
			clear: func(t *testing.T, in *inst, db string) {
				fill := filepath.Join(fmt.Sprintf("/proc/%d/root", holder.cmd.Process.Pid), in.dir, "data", "fill")
				if err := os.Remove(fill); err != nil {
					t.Fatal(err)
				}
			},
			reason: []string{"full"},
		},
	}
}

func TestStoreFaultReadOnly(t *testing.T) { t.Parallel(); testStoreFault(t, storeFaults()[0]) }
func TestStoreFaultLocked(t *testing.T)   { t.Parallel(); testStoreFault(t, storeFaults()[1]) }
func TestStoreFaultFull(t *testing.T)     { t.Parallel(); testStoreFault(t, storeFaults()[2]) }

// readyz returns /readyz's status and reason.
func readyz(t *testing.T, d *daemon) (int, string) {
	t.Helper()
	code, body := d.do("GET", "/readyz", "", "")
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return code, e.Error
}

func testStoreFault(t *testing.T, f storeFault) {
	const conc = 2
	u := newUpstream(t)
	in := newInst(t)
	cli := in.cli
	if f.setup != nil {
		cli = f.setup(t, in)
	}
	storeRel := filepath.Join(f.storeDir, "pacer.db")
	dbPath := filepath.Join(in.dir, storeRel)

	// Six sources that keep the two permits busy, one that starts failing
	// during the fault and must reach the error state then, and one that is
	// paused through the API during the fault.
	var b strings.Builder
	for i := range 6 {
		u.Set(fmt.Sprintf("/busy/%d", i), behavior{Hold: 150 * time.Millisecond})
		fmt.Fprintf(&b, "  - {name: busy%d, type: http, url: %q}\n", i, u.URL(fmt.Sprintf("/busy/%d", i)))
	}
	fmt.Fprintf(&b, "  - {name: flaky, type: http, url: %q, error_after: 3}\n", u.URL("/flaky"))
	fmt.Fprintf(&b, "  - {name: pausee, type: http, url: %q}\n", u.URL("/pausee"))
	cfg := `concurrency: ` + strconv.Itoa(conc) + `
shutdown_timeout: 5s
log: {level: debug}
defaults:
  schedule: "@every 200ms"
  timeout: 2s
  backoff: {initial: 100ms, max: 300ms, jitter: 0}
  breaker: {failures: 0}
  error_after: 0
sources:
` + b.String()
	in.writeConfig(cfg)
	// writeConfig puts the store next to the config: move it if asked.
	if f.storeDir != "" {
		writeFile(t, in.cfgPath, strings.Replace(readFile(t, in.cfgPath), "store: pacer.db", "store: "+storeRel, 1))
	}
	d := in.start()
	eventually(t, 10*time.Second, "every source polled and committed", func() error {
		for _, name := range []string{"busy0", "busy5", "flaky", "pausee"} {
			if o := d.source(name); o.PollsTotal < 2 {
				return errf("%s", o)
			}
		}
		if n := d.metric("pacer_store_errors_total"); n != 0 {
			return errf("store errors before the fault: %v", n)
		}
		return nil
	})
	u.ResetPeaks()
	peakFrom := time.Now()

	// The fault.
	faultAt := time.Now()
	f.inject(t, in, dbPath)
	u.Set("/flaky", behavior{Status: 502})
	var reason string
	eventually(t, 15*time.Second, "/readyz 503 with a reason", func() error {
		code, r := readyz(t, d)
		if code != 503 || r == "" {
			return errf("readyz %d %q", code, r)
		}
		reason = r
		return nil
	})
	detect := time.Since(faultAt)
	t.Logf("%s: /readyz 503 %v after the fault began: %q", f.name, detect.Round(time.Millisecond), reason)
	for _, w := range f.reason {
		if !strings.Contains(strings.ToLower(reason), w) {
			t.Errorf("/readyz reason %q does not say %q", reason, w)
		}
	}
	if code, body := d.do("POST", "/api/sources/pausee/pause", "", `{"reason": "during the fault"}`); code != 200 {
		t.Errorf("pause during the fault: %d %s", code, body)
	}
	busyBefore := u.Count("/busy/0") + u.Count("/busy/3")
	during := 20 * time.Second
	if f.lasts > 0 {
		during = time.Until(faultAt.Add(f.lasts - 500*time.Millisecond))
	}
	eventually(t, during, "store errors counted, flaky in error, polling going on, for at least 4s, all during the fault", func() error {
		var missing []string
		if since := time.Since(faultAt); since < 4*time.Second {
			missing = append(missing, fmt.Sprintf("the fault is only %v old", since.Round(time.Millisecond)))
		}
		if n := d.metric("pacer_store_errors_total"); n < 1 {
			missing = append(missing, fmt.Sprintf("pacer_store_errors_total is %v", n))
		}
		if o := d.source("flaky"); o.State != "error" {
			missing = append(missing, fmt.Sprintf("flaky is %s after %d polls", o.State, o.PollsTotal))
		}
		if n := u.Count("/busy/0") + u.Count("/busy/3"); n < busyBefore+4 {
			missing = append(missing, fmt.Sprintf("%d polls of busy0 and busy3 since the fault", n-busyBefore))
		}
		if len(missing) > 0 {
			return errf("%s", strings.Join(missing, "; "))
		}
		return nil
	})
	if code, _ := readyz(t, d); code != 503 && (f.lasts == 0 || time.Since(faultAt) < f.lasts-time.Second) {
		t.Errorf("/readyz %d while the store is still broken", code)
	}
	if code, _ := d.do("GET", "/healthz", "", ""); code != 200 || d.exited() {
		t.Fatalf("the daemon is not serving during the fault (healthz %d, exited %v)", code, d.exited())
	}
	errorsDuring := d.metric("pacer_store_errors_total")
	flakyHist := d.history("flaky", 100)

	// The fault clears.
	f.clear(t, in, dbPath)
	clearedAt := time.Now()
	eventually(t, 20*time.Second, "/readyz 200 after the fault", func() error {
		if code, r := readyz(t, d); code != 200 {
			return errf("readyz %d %q", code, r)
		}
		return nil
	})
	recovery := time.Since(clearedAt)
	// Rule 3.1 seen from the upstream: the answered requests (a timed-out
	// request's handler outlives its poll until the server notices, which
	// counted 4 against a cap of 2 on a loaded machine).
	if p, cancelled := u.PeakAnswered(peakFrom); p > conc {
		t.Errorf("upstream peak %d answered requests > concurrency %d during the fault (%d cancelled left out)", p, conc, cancelled)
	}

	// Freeze every source (flaky is in error, pausee paused), wait for the
	// polls in flight, and compare the API with the store after a graceful
	// stop.
	for i := range 6 {
		if code, body := d.do("POST", fmt.Sprintf("/api/sources/busy%d/pause", i), "", `{"reason": "freeze"}`); code != 200 {
			t.Fatalf("pause busy%d: %d %s", i, code, body)
		}
	}
	var api map[string]sourceObj
	eventually(t, 10*time.Second, "nothing in flight and the API still", func() error {
		if n := d.metric("pacer_inflight"); n != 0 {
			return errf("%v in flight", n)
		}
		a := d.sources()
		if fmt.Sprint(a) != fmt.Sprint(api) {
			api = a
			return errf("still changing")
		}
		return nil
	})
	flakyHistAfter := d.history("flaky", 100)
	d.stop(15 * time.Second)

	r := cli("status", "-json")
	if r.code != 0 {
		t.Fatalf("status -json after the stop: %s", r)
	}
	var stored []sourceObj
	if err := json.Unmarshal([]byte(r.stdout), &stored); err != nil {
		t.Fatalf("status -json: %v\n%s", err, r.stdout)
	}
	if len(stored) != len(api) {
		t.Errorf("%d sources stored, %d in the API", len(stored), len(api))
	}
	for _, s := range stored {
		if err := sameState(api[s.Name], s); err != nil {
			t.Errorf("%s: the store differs from what the API showed: %v\n api:   %s\n store: %s", s.Name, err, api[s.Name], s)
		}
	}
	// The changes made during the fault are among them.
	byName := map[string]sourceObj{}
	for _, s := range stored {
		byName[s.Name] = s
	}
	if o := byName["flaky"]; o.ErrorReason == "" || o.ConsecutiveFailures < 3 {
		t.Errorf("flaky's error state (reached during the fault) was not stored: %s", o)
	}
	if o := byName["pausee"]; o.State != "paused" || o.PausedReason != "during the fault" {
		t.Errorf("the pause made during the fault was not stored: %s", o)
	}
	// History: every record the API showed is stored, newest first.
	r = cli("history", "-json", "-n", "100", "flaky")
	var hist []histRec
	if err := json.Unmarshal([]byte(r.stdout), &hist); err != nil || r.code != 0 {
		t.Fatalf("history -json flaky: %v\n%s", err, r)
	}
	if len(hist) != len(flakyHistAfter) || len(hist) < len(flakyHist) {
		t.Errorf("flaky: %d records stored, the API showed %d (and %d during the fault)", len(hist), len(flakyHistAfter), len(flakyHist))
	}
	for i := range min(len(hist), len(flakyHistAfter)) {
		a, s := flakyHistAfter[i], hist[i]
		if !a.StartedAt.Equal(s.StartedAt) || a.Outcome != s.Outcome || a.Error != s.Error {
			t.Errorf("flaky record %d: API %+v, stored %+v", i, a, s)
		}
	}
	t.Logf("FIGURES %s: readyz 503 after %v with reason %q; %v store errors counted during the fault; "+
		"upstream peak %d (cap %d); readyz 200 again %v after the fault cleared",
		f.name, detect.Round(time.Millisecond), reason, errorsDuring, u.Peak(), conc, recovery.Round(time.Millisecond))
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
