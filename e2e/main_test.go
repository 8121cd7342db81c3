// Package e2e runs the built pacer binary against a fake upstream and checks
// the external contract (/work/shared/CONTRACT.md) from the outside: command
// line, configuration, behaviour, admin API and metrics (sections 1 to 6),
// and the systemd integration (section 7).
//
// TestMain builds the binary once ($PACER_E2E_BIN names a binary to test
// instead). Every test starts its own daemon(s) with their own directory,
// store and admin port, so the tests run in parallel.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
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
)

// pacerBin is the binary under test, built by TestMain.
var pacerBin string

func TestMain(m *testing.M) {
	flag.Parse()
	// The tests mostly wait on timers and child processes: run them all at
	// once (the default is GOMAXPROCS, 2 on a small machine), unless the
	// caller chose a -parallel value.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			parallelSet = true
		}
	})
	if !parallelSet {
		_ = flag.Set("test.parallel", "32")
	}
	if bin := os.Getenv("PACER_E2E_BIN"); bin != "" {
		// Test a binary built elsewhere (another checkout, a release).
		pacerBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "pacer-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	pacerBin = filepath.Join(dir, "pacer")
	goTool := "go"
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		goTool = p
	}
	build := exec.Command(goTool, "build", "-o", pacerBin, "github.com/pacer-dev/pacer")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building pacer failed: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// errf builds the error a condition of eventually or never returns.
var errf = fmt.Errorf

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ---------------------------------------------------------------------------
// Waiting.

// eventually polls cond every 20ms until it returns nil, and fails the test
// with cond's last error when timeout passes first. The timeout grows by the
// lateness this process saw meanwhile (stalls): a starved machine delays the
// daemon as much, and a quiet one keeps the bound strict.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return
		}
		if now := time.Now(); now.After(start.Add(stalls.within(timeout, start, now))) {
			t.Fatalf("timed out after %s waiting for %s: %v", now.Sub(start).Round(time.Millisecond), what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// softly is eventually without stopping the test: it reports with t.Errorf
// and returns false when timeout passes first.
func softly(t testing.TB, timeout time.Duration, what string, cond func() error) bool {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return true
		}
		if now := time.Now(); now.After(start.Add(stalls.within(timeout, start, now))) {
			t.Errorf("timed out after %s waiting for %s: %v", now.Sub(start).Round(time.Millisecond), what, err)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// never checks for d (every 20ms) that bad returns nil; it fails the test at
// once when bad reports something. It is how a test waits for something NOT
// to happen.
func never(t testing.TB, d time.Duration, what string, bad func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := bad(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleepUntil holds still until at (the end of a window whose outcome is
// checked afterwards).
func sleepUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}

// ---------------------------------------------------------------------------
// Thread-safe output capture.

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// ---------------------------------------------------------------------------
// An installation: a directory with a config file, a store and an admin port.

type inst struct {
	t       *testing.T
	dir     string // where config.yaml (and the store) live
	cwd     string // working directory of every pacer process (not dir)
	cfgPath string
	addr    string   // admin.listen
	admin   string   // extra lines under admin: (e.g. token_file)
	env     []string // extra environment
	// wrap, when set, runs the daemon through a wrapper: wrap[0] wrap[1:]...
	// pacer run -config FILE (e.g. sh -c 'ulimit ...; exec "$0" "$@"').
	wrap []string
	// noAdmin writes admin.listen: "" (the API disabled).
	noAdmin bool
}

// freeAddr returns a loopback address nobody listens on. Ports come from
// below the kernel's ephemeral range (which httptest servers and outgoing
// connections use), handed out once each, so that a daemon restarted on the
// same address does not find it taken by some other test's connection.
func freeAddr(t testing.TB) string {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	if nextPort == 0 {
		lo, span := 20000, 10000
		if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			if f := strings.Fields(string(data)); len(f) == 2 {
				if eph, err := strconv.Atoi(f[0]); err == nil && eph > 3000 {
					span = min(10000, eph-2000)
					lo = eph - span
				}
			}
		}
		nextPort = lo + rand.IntN(span/2)
		lastPort = lo + span - 1
	}
	for ; nextPort <= lastPort; nextPort++ {
		addr := "127.0.0.1:" + strconv.Itoa(nextPort)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = l.Close()
		nextPort++
		return addr
	}
	// Exhausted (never in practice): let the kernel choose.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

var (
	portMu             sync.Mutex
	nextPort, lastPort int
)

// newInst returns an installation whose config is header + body.
func newInst(t *testing.T) *inst {
	t.Helper()
	dir := t.TempDir()
	return &inst{
		t:       t,
		dir:     dir,
		cwd:     t.TempDir(),
		cfgPath: filepath.Join(dir, "config.yaml"),
		addr:    freeAddr(t),
	}
}

// storePath is the SQLite file ("store: pacer.db", relative to the config).
func (in *inst) storePath() string { return filepath.Join(in.dir, "pacer.db") }

// writeConfig writes the config file: store, admin and body (the rest:
// concurrency, defaults, limits, sources...).
func (in *inst) writeConfig(body string) {
	in.t.Helper()
	listen := in.addr
	if in.noAdmin {
		listen = ""
	}
	hdr := "store: pacer.db\nadmin:\n  listen: \"" + listen + "\"\n" + in.admin
	writeFile(in.t, in.cfgPath, hdr+body)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// replaceFile writes content to path through a temporary file renamed
// over it, so that a process reading path meanwhile sees the old content
// or the new one, never an empty or partial file.
func replaceFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".new"
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("rename %s: %v", tmp, err)
	}
}

// baseEnv is the test's environment without PACER_CONFIG, plus extra.
func baseEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PACER_CONFIG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// ---------------------------------------------------------------------------
// The command line.

type cliResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runPacer runs the binary with args in dir and env (see baseEnv).
func runPacer(t testing.TB, dir string, env []string, args ...string) cliResult {
	t.Helper()
	r, err := execPacer(dir, env, 30*time.Second, args...)
	if err != nil {
		t.Fatalf("pacer %v: %v\n%s", args, err, r)
	}
	return r
}

// execPacer runs the binary with args in dir and env, for at most timeout.
// err is set when the process could not run or did not finish in time; an
// exit status other than 0 is in the result, not an error.
func execPacer(dir string, env []string, timeout time.Duration, args ...string) (cliResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, pacerBin, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		return r, err
	}
	if ctx.Err() != nil {
		return r, fmt.Errorf("did not finish within %s", timeout)
	}
	return r, nil
}

// cli runs "pacer CMD -config FILE ARGS..." for this installation.
func (in *inst) cli(args ...string) cliResult {
	in.t.Helper()
	full := append([]string{args[0], "-config", in.cfgPath}, args[1:]...)
	return runPacer(in.t, in.cwd, baseEnv(in.env), full...)
}

// mustCLI runs cli and requires exit status 0.
func (in *inst) mustCLI(args ...string) cliResult {
	in.t.Helper()
	r := in.cli(args...)
	if r.code != 0 {
		in.t.Fatalf("pacer %v: want exit 0, got %s", args, r)
	}
	return r
}

// statusJSON runs "pacer status -json NAME" and decodes the object.
func (in *inst) statusJSON(name string) sourceObj {
	in.t.Helper()
	r := in.mustCLI("status", "-json", name)
	var o sourceObj
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil {
		in.t.Fatalf("status -json %s: %v\n%s", name, err, r)
	}
	return o
}

// statusAll runs "pacer status -json" and decodes the array.
func (in *inst) statusAll() map[string]sourceObj {
	in.t.Helper()
	r := in.mustCLI("status", "-json")
	var list []sourceObj
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		in.t.Fatalf("status -json: %v\n%s", err, r)
	}
	m := map[string]sourceObj{}
	for _, o := range list {
		m[o.Name] = o
	}
	return m
}

// ---------------------------------------------------------------------------
// The daemon.

type daemon struct {
	in      *inst
	t       *testing.T
	cmd     *exec.Cmd
	stderr  *syncBuffer
	stdout  *syncBuffer
	done    chan struct{}
	started time.Time
	exitAt  time.Time
	state   *os.ProcessState
	runq    *runqSampler // set by watchStarvation
}

// start runs "pacer run" and waits until /readyz answers 200.
func (in *inst) start() *daemon {
	in.t.Helper()
	d := in.spawn()
	d.waitReady(20 * time.Second)
	return d
}

// spawn runs "pacer run -config FILE" without waiting for readiness.
func (in *inst) spawn() *daemon {
	in.t.Helper()
	return in.spawnWith(in.cfgPath)
}

func (in *inst) spawnWith(cfgPath string) *daemon {
	in.t.Helper()
	return in.launch(cfgPath, true)
}

// launch starts "pacer run -config cfgPath". Its cleanup stops the daemon
// gracefully (so that it kills the process groups of its exec polls; a
// SIGKILLed daemon leaves them running, writing into a temp dir being
// removed), and with dumpLog prints its standard error if the test failed.
func (in *inst) launch(cfgPath string, dumpLog bool) *daemon {
	t := in.t
	t.Helper()
	d := &daemon{in: in, t: t, stderr: &syncBuffer{}, stdout: &syncBuffer{}, done: make(chan struct{})}
	argv := append(append([]string(nil), in.wrap...), pacerBin, "run", "-config", cfgPath)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Dir = in.cwd
	d.cmd.Env = baseEnv(in.env)
	d.cmd.Stderr = d.stderr
	d.cmd.Stdout = d.stdout
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start pacer run: %v", err)
	}
	go func() {
		_ = d.cmd.Wait()
		d.exitAt = time.Now()
		d.state = d.cmd.ProcessState
		close(d.done)
	}()
	t.Cleanup(func() {
		if !d.exited() {
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.done:
			case <-time.After(15 * time.Second):
				_ = d.cmd.Process.Signal(syscall.SIGKILL)
				<-d.done
			}
		}
		if dumpLog && t.Failed() {
			t.Logf("daemon pid %d stderr:\n%s", d.cmd.Process.Pid, d.stderr.String())
		}
	})
	return d
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) logs() string { return d.stderr.String() }

func (d *daemon) waitReady(timeout time.Duration) {
	d.t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		if d.exited() {
			d.t.Fatalf("pacer run exited with %v before it was ready; stderr:\n%s", d.state, d.logs())
		}
		resp, err := client.Get("http://" + d.in.addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("pacer run not ready within %s (last: %v); stderr:\n%s", timeout, err, d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) signal(sig os.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits up to timeout for the daemon to exit and returns its exit code
// (-1 when killed by a signal); ok is false when it is still running.
func (d *daemon) wait(timeout time.Duration) (code int, ok bool) {
	select {
	case <-d.done:
		return d.state.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// stop sends SIGTERM and requires exit status 0 within timeout.
func (d *daemon) stop(timeout time.Duration) {
	d.t.Helper()
	d.signal(syscall.SIGTERM)
	code, ok := d.wait(timeout)
	if !ok {
		d.t.Fatalf("pacer run did not exit within %s of SIGTERM; stderr:\n%s", timeout, d.logs())
	}
	if code != 0 {
		d.t.Fatalf("pacer run exited %d after SIGTERM, want 0; stderr:\n%s", code, d.logs())
	}
}

// kill sends SIGKILL and waits for the process to die.
func (d *daemon) kill() {
	d.t.Helper()
	d.signal(syscall.SIGKILL)
	if _, ok := d.wait(10 * time.Second); !ok {
		d.t.Fatalf("pacer run survived SIGKILL")
	}
}

// ---------------------------------------------------------------------------
// The admin API.

var apiClient = &http.Client{Timeout: 10 * time.Second}

// do sends a request to the admin API and returns status and body.
func (d *daemon) do(method, path, token, body string) (int, []byte) {
	d.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+d.in.addr+path, rd)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, data
}

func (d *daemon) getJSON(path string, v any) {
	d.t.Helper()
	code, body := d.do(http.MethodGet, path, "", "")
	if code != http.StatusOK {
		d.t.Fatalf("GET %s: status %d: %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		d.t.Fatalf("GET %s: decode: %v\n%s", path, err, body)
	}
}

// source is GET /api/sources/{name}.
func (d *daemon) source(name string) sourceObj {
	d.t.Helper()
	var o sourceObj
	d.getJSON("/api/sources/"+name, &o)
	return o
}

func (d *daemon) sources() map[string]sourceObj {
	d.t.Helper()
	var list []sourceObj
	d.getJSON("/api/sources", &list)
	m := map[string]sourceObj{}
	for _, o := range list {
		m[o.Name] = o
	}
	return m
}

func (d *daemon) history(name string, n int) []histRec {
	d.t.Helper()
	var recs []histRec
	d.getJSON(fmt.Sprintf("/api/sources/%s/history?n=%d", name, n), &recs)
	return recs
}

// sourceObj is the source object of contract section 4.
type sourceObj struct {
	Name                string     `json:"name"`
	Type                string     `json:"type"`
	Schedule            string     `json:"schedule"`
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	Breaker             string     `json:"breaker"`
	NextRunAt           *time.Time `json:"next_run_at"`
	LastRunAt           *time.Time `json:"last_run_at"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastError           string     `json:"last_error"`
	ErrorReason         string     `json:"error_reason"`
	PausedReason        string     `json:"paused_reason"`
	PollsTotal          int64      `json:"polls_total"`
	FailuresTotal       int64      `json:"failures_total"`
	ThrottledTotal      int64      `json:"throttled_total"`
}

func (o sourceObj) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// histRec is one history record (contract section 5).
type histRec struct {
	StartedAt  time.Time `json:"started_at"`
	DurationMs int64     `json:"duration_ms"`
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error"`
	StatusCode *int      `json:"status_code"`
	ExitCode   *int      `json:"exit_code"`
	Bytes      int64     `json:"bytes"`
}

// ---------------------------------------------------------------------------
// Small helpers.

func sameTime(a, b *time.Time) bool {
	switch {
	case a == nil || b == nil:
		return a == nil && b == nil
	}
	return a.Sub(*b).Abs() < time.Millisecond
}

func fmtTime(p *time.Time) string {
	if p == nil {
		return "null"
	}
	return p.Format(time.RFC3339Nano)
}

// procDead reports whether pid no longer runs (gone, or a zombie nobody
// reaped yet).
func procDead(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}
