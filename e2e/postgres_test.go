package e2e

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/internal/pgtest"
)

// pgStore creates a schema of its own on the server of PACER_TEST_POSTGRES
// (scripts/test.sh starts one) and returns a store URL on it, with a
// password that the server (trust authentication) ignores and that must
// never be shown. The test fails without the variable.
func pgStore(t *testing.T) (dsn, password string) {
	t.Helper()
	u, err := url.Parse(pgtest.Schema(t, "e2e_"))
	if err != nil {
		t.Fatal(err)
	}
	password = "pg-" + pgtest.RandomHex(6)
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String(), password
}

// Contract section 8 (until the cluster exists): the daemon on a
// PostgreSQL store polls, commits, survives kill -9 with its states and
// history, refuses a second daemon on the same store (pid and host named),
// and the CLI reads and changes the store with and without a daemon. The
// password never shows.
func TestPostgresStore(t *testing.T) {
	t.Parallel()
	dsn, password := pgStore(t)
	u := newUpstream(t)
	u.Set("/bad", behavior{Status: 500})
	in := newInst(t)
	body := `concurrency: 4
defaults:
  schedule: "@every 1s"
  backoff: {initial: 100ms, max: 1s, multiplier: 2, jitter: 0}
sources:
  - {name: ok, type: http, url: "` + u.URL("/ok") + `"}
  - {name: open, type: http, url: "` + u.URL("/bad") + `", breaker: {failures: 1, cooldown: 1m}, error_after: 0}
  - {name: quiet, type: http, url: "` + u.URL("/quiet") + `"}
`
	writeFile(t, in.cfgPath, "store: \""+dsn+"\"\nadmin:\n  listen: \""+in.addr+"\"\n"+body)

	// Without a daemon: pause writes the store (creating its tables).
	in.mustCLI("pause", "quiet", "-reason", "offline pause")
	if o := in.statusJSON("quiet"); o.State != "paused" || o.PausedReason != "offline pause" {
		t.Fatalf("quiet after an offline pause: %s", o)
	}

	d := in.start()
	u.waitArrivals(t, "/ok", 2, 5*time.Second)
	eventually(t, 5*time.Second, "open's breaker open", func() error {
		if o := d.source("open"); o.State != "open" {
			return errf("open: %s", o)
		}
		return nil
	})
	if n := u.Count("/quiet"); n != 0 {
		t.Errorf("a source paused before the start was polled %d times", n)
	}

	// A second daemon on the same store exits 1 at once, naming the
	// running daemon's pid and host, and polls nothing.
	second := filepath.Join(in.dir, "second.yaml")
	writeFile(t, second, "store: \""+dsn+"\"\nadmin: {listen: \""+freeAddr(t)+"\"}\nsources:\n"+
		"  - {name: ok, type: http, url: \""+u.URL("/ok2")+"\", schedule: \"@every 1s\"}\n")
	d2 := in.launch(second, true)
	code, exited := d2.wait(10 * time.Second)
	host, _ := os.Hostname()
	switch msg := d2.logs(); {
	case !exited:
		t.Fatalf("a second pacer run on the PostgreSQL store still runs after 10 s:\n%s", msg)
	case code != 1:
		t.Errorf("second pacer run: exit %d, want 1:\n%s", code, msg)
	case !strings.Contains(msg, "pid "+strconv.Itoa(d.pid())+" on host "+host):
		t.Errorf("second pacer run: the message must name pid %d on host %s:\n%s", d.pid(), host, msg)
	case strings.Contains(msg, password):
		t.Errorf("second pacer run shows the store's password:\n%s", msg)
	}
	if n := u.Count("/ok2"); n != 0 {
		t.Errorf("the refused daemon polled %d times", n)
	}

	// With the daemon: pause through the store's command queue (or the API).
	in.mustCLI("pause", "ok", "-reason", "maintenance")
	eventually(t, 2*time.Second, "ok paused in the daemon", func() error {
		if o := d.source("ok"); o.State != "paused" || o.PausedReason != "maintenance" {
			return errf("ok: %s", o)
		}
		return nil
	})
	beforeHist := d.history("ok", 100)
	beforeOpen := d.source("open")
	if len(beforeHist) < 2 {
		t.Fatalf("ok has %d history records before the kill, want >= 2", len(beforeHist))
	}

	// kill -9, then status reads the same state from PostgreSQL.
	d.kill()
	offline := in.statusAll()
	if o := offline["ok"]; o.State != "paused" || o.PollsTotal != int64(len(beforeHist)) {
		t.Errorf("ok after kill -9: %s; want paused with %d polls", o, len(beforeHist))
	}
	if o := offline["open"]; o.State != "open" || !sameTime(o.NextRunAt, beforeOpen.NextRunAt) {
		t.Errorf("open after kill -9: %s; want %s", o, beforeOpen)
	}
	r := in.mustCLI("history", "-json", "ok")
	if n := strings.Count(r.stdout, `"started_at"`); n != len(beforeHist) {
		t.Errorf("history -json ok after kill -9: %d records, want %d:\n%s", n, len(beforeHist), r.stdout)
	}

	// The restart resumes: ok stays paused until resumed, open's breaker
	// stays open (cooldown 1 m), the history is kept; the killed daemon's
	// lock does not block the start.
	openCalls := u.Count("/bad")
	d3 := in.start()
	if o := d3.source("open"); o.State != "open" {
		t.Errorf("open after the restart: %s", o)
	}
	in.mustCLI("resume", "ok")
	n := u.Count("/ok")
	u.waitArrivals(t, "/ok", n+1, 5*time.Second)
	if got := d3.history("ok", 100); len(got) <= len(beforeHist) || !got[len(got)-1].StartedAt.Equal(beforeHist[len(beforeHist)-1].StartedAt) {
		t.Errorf("history after the restart: %d records, want more than %d ending with the oldest before the kill", len(got), len(beforeHist))
	}
	if c := u.Count("/bad"); c != openCalls {
		t.Errorf("open was called %d times after the restart while its breaker was open", c-openCalls)
	}
	d3.stop(10 * time.Second)
	for _, out := range []string{d.logs(), d3.logs(), r.stdout, r.stderr} {
		if strings.Contains(out, password) {
			t.Errorf("the store's password shows in the output:\n%s", out)
		}
	}
}
