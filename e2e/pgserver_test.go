package e2e

import (
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pgServer is a PostgreSQL server of one test's own (not the shared one of
// PACER_TEST_POSTGRES), which the test may stop and start again: started by
// scripts/postgres.sh (initdb and pg_ctl as the postgres user, a unix
// socket in its temporary directory), removed when the test ends.
type pgServer struct {
	t      *testing.T
	dir    string // the server's directory (data/, the socket, server.log)
	bindir string
	dsn    string // a store URL of its "postgres" database
}

// startPGServer starts a server of t's own.
func startPGServer(t *testing.T) *pgServer {
	t.Helper()
	script, err := filepath.Abs("../scripts/postgres.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", `. "$1" && pg_start >&2 && printf '%s\n%s\n%s\n' "$PG_TEST_DIR" "$(pg_bindir)" "$PACER_TEST_POSTGRES"`, "pgserver", script).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + string(ee.Stderr)
		}
		t.Fatalf("start a PostgreSQL server of the test's own with scripts/postgres.sh (Debian's postgresql-15): %s", msg)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		t.Fatalf("scripts/postgres.sh printed %q, want the directory, the binaries and the URL", out)
	}
	p := &pgServer{t: t, dir: lines[0], bindir: lines[1], dsn: lines[2]}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", p.dir).CombinedOutput(); err != nil {
			t.Errorf("stop the test's PostgreSQL server: %v: %s", err, out)
		}
	})
	return p
}

// pgCtl runs pg_ctl as the postgres user on the server's data directory.
func (p *pgServer) pgCtl(args ...string) {
	p.t.Helper()
	argv := append([]string{"runuser", "-u", "postgres", "--", filepath.Join(p.bindir, "pg_ctl"), "-D", filepath.Join(p.dir, "data")}, args...)
	if me, err := user.Current(); err == nil && me.Username == "postgres" {
		argv = argv[4:] // as scripts/postgres.sh's as_postgres
	}
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		p.t.Fatalf("pg_ctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// stop stops the server with -m fast (clients are disconnected at once)
// and returns once it is down.
func (p *pgServer) stop() time.Time {
	p.t.Helper()
	p.pgCtl("-m", "fast", "-w", "-t", "30", "stop")
	return time.Now()
}

// start starts the stopped server again and returns once it accepts
// connections.
func (p *pgServer) start() time.Time {
	p.t.Helper()
	p.pgCtl("-l", filepath.Join(p.dir, "server.log"), "-w", "-t", "30", "start")
	return time.Now()
}
