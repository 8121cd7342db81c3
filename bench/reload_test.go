package bench

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/internal/pgtest"
)

// selfCPU is the user+system CPU of process pid so far (pgtest.ProcCPU without
// its reaped children), or -1 if it cannot be read.
func selfCPU(pid int) time.Duration {
	cpu, _, err := pgtest.ProcCPU(pid, false)
	if err != nil {
		return -1
	}
	return cpu
}

// notifySocket is a unix datagram socket standing in for systemd's
// NOTIFY_SOCKET: the daemon reports READY=1 on it after its start and
// after each reload.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

func newNotifySocket(b *testing.B, dir string) *notifySocket {
	b.Helper()
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return &notifySocket{path: path, conn: conn}
}

// waitReady waits (up to limit) for a message with READY=1.
func (n *notifySocket) waitReady(b *testing.B, limit time.Duration) {
	b.Helper()
	buf := make([]byte, 4096)
	if err := n.conn.SetReadDeadline(time.Now().Add(limit)); err != nil {
		b.Fatal(err)
	}
	for {
		k, err := n.conn.Read(buf)
		if err != nil {
			b.Fatalf("no READY=1 within %v: %v", limit, err)
		}
		if bytes.Contains(buf[:k], []byte("READY=1")) {
			return
		}
	}
}

// BenchmarkReload measures a SIGHUP reload of the built daemon with
// 100,000 http sources ("@every 1m", polling a loopback server of this
// process) of which one changes each time (target of issue 15: <= 100 ms
// of CPU). Each of PACER_BENCH_ROUNDS (default 3) rounds rewrites the
// config with one source's URL changed (or back), sends SIGHUP and waits for
// READY=1 on NOTIFY_SOCKET; the reload's CPU is the daemon's CPU from the
// signal to 300 ms after READY=1 (the tail of the reload: its commits, the
// release of its garbage) minus the daemon's steady polling CPU over the
// same time, measured for 3 s before. It also reports the RSS after the
// rounds.
//
//	go test ./bench -run '^$' -bench BenchmarkReload -benchtime=1x -timeout 30m -v
func BenchmarkReload(b *testing.B) {
	const n, conc = 100_000, 64
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	dir := b.TempDir()
	bin := buildPacer(b, dir)
	cfg := writeConfig(b, dir, n, conc, "@every 1m", srv.URL, "")
	orig, err := os.ReadFile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	changed := bytes.Replace(orig, []byte("/s/12345\""), []byte("/s/12345x\""), 1)
	if bytes.Equal(changed, orig) {
		b.Fatal("the generated config has no source 12345 to change")
	}
	ns := newNotifySocket(b, dir)
	cmd := exec.Command(bin, "run", "-config", cfg)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+ns.path)
	logPath := cfg + ".log"
	if d := os.Getenv("PACER_BENCH_LOG_DIR"); d != "" {
		logPath = filepath.Join(d, "reload.log") // kept after the run (with GODEBUG=gctrace=1, say)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	pid := cmd.Process.Pid
	ns.waitReady(b, 3*time.Minute)
	time.Sleep(5 * time.Second) // past the start-up's first commits: a fixed settling time
	c0, t0 := selfCPU(pid), time.Now()
	time.Sleep(3 * time.Second)
	steady := float64(selfCPU(pid)-c0) / float64(time.Since(t0)) // cores
	var cpu, wall []float64
	for r := range rounds {
		body := changed
		if r%2 == 1 {
			body = orig
		}
		tmp := cfg + ".tmp"
		if err := os.WriteFile(tmp, body, 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, cfg); err != nil {
			b.Fatal(err)
		}
		c0, t0 := selfCPU(pid), time.Now()
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			b.Fatal(err)
		}
		ns.waitReady(b, time.Minute)
		w := time.Since(t0)
		time.Sleep(300 * time.Millisecond)
		el := time.Since(t0)
		c := (selfCPU(pid) - c0).Seconds() - steady*el.Seconds()
		cpu, wall = append(cpu, c), append(wall, w.Seconds())
		b.Logf("round %d: SIGHUP to READY=1 %v, reload CPU %.3f s (steady polling %.3f cores subtracted)", r+1, w.Round(time.Millisecond), c, steady)
		time.Sleep(2 * time.Second)
	}
	rss := StatusKiB(strconv.Itoa(pid), "VmRSS")
	b.Logf("RSS after %d reloads: %d MiB (HWM %d MiB)", rounds, rss/1024, StatusKiB(strconv.Itoa(pid), "VmHWM")/1024)
	b.ReportMetric(Median(cpu), "reload-cpu-s")
	b.ReportMetric(Median(wall), "reload-wall-s")
	b.ReportMetric(steady, "steady-cores")
	b.ReportMetric(float64(rss)/1024, "RSS-after-MiB")
}
