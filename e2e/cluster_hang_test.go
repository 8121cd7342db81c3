package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Rule 8.7 with a statement that hangs instead of a connection that fails:
// three members (lease 3 s), 60 sources on "@every 1s". A session holds
// cluster_shards, then source_states, locked (ACCESS EXCLUSIVE) for 10 s
// each, more than three leases: every statement of the members on the
// table waits. Every member answers 503 on /readyz meanwhile, and is ready
// again by itself after. Nothing is lost: after a graceful stop of the
// cluster the store counts every poll the upstream saw (before, the polls
// in flight when the lock began were refused at their commit as "commits
// refused for shards no longer held": 53 and 54 of 1,700 lost in the
// issue's run).
func TestClusterHangingStatement(t *testing.T) {
	dsn, _ := pgStore(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	u := newUpstream(t)
	var b strings.Builder
	b.WriteString("concurrency: 8\ndefaults:\n  schedule: \"@every 1s\"\n  timeout: 5s\nsources:\n")
	names, paths := make([]string, 60), make([]string, 60)
	for i := range names {
		names[i], paths[i] = fmt.Sprintf("s%d", i), fmt.Sprintf("/s/%d", i)
		u.Set(paths[i], behavior{Hold: 20 * time.Millisecond})
		fmt.Fprintf(&b, "  - {name: %s, type: http, url: \"%s\"}\n", names[i], u.URL(paths[i]))
	}
	const lease = 3 * time.Second
	ms := make([]*member, 3)
	for i := range ms {
		in := newInst(t)
		name := fmt.Sprintf("m%d", i+1)
		writeFile(t, in.cfgPath, "store: \""+dsn+"\"\nadmin:\n  listen: \""+in.addr+"\"\n"+
			fmt.Sprintf("cluster: {name: %s, lease: %s}\n", name, lease)+b.String())
		ms[i] = &member{name: name, in: in, d: in.launch(in.cfgPath, true)}
	}
	for _, m := range ms {
		m.d.waitReady(30 * time.Second)
	}
	settled(t, ms[0], names, "m1", "m2", "m3")

	for _, table := range []string{"cluster_shards", "source_states"} {
		counts := make([]int, len(paths))
		for i, p := range paths {
			counts[i] = u.Count(p)
		}
		for i, p := range paths {
			u.waitArrivals(t, p, counts[i]+2, 4*lease+10*time.Second)
		}
		hold := 10 * time.Second
		locked := make(chan error, 1)
		go func() { locked <- holdLock(db, table, hold) }()
		begun := time.Now()
		for _, m := range ms {
			eventually(t, 2*lease+5*time.Second, m.name+" answers 503 on /readyz while "+table+" is locked", func() error {
				code, body := m.d.do(http.MethodGet, "/readyz", "", "")
				if code != http.StatusServiceUnavailable {
					return errf("%d %s", code, body)
				}
				return nil
			})
		}
		if err := <-locked; err != nil {
			t.Fatalf("lock %s: %v", table, err)
		}
		back := time.Now()
		for _, m := range ms {
			m.d.waitReady(4*lease + 10*time.Second)
		}
		eventually(t, 4*lease+10*time.Second, "every source polled again after the lock on "+table, func() error {
			for _, p := range paths {
				if firstAfter(u, p, back).IsZero() {
					return errf("%s not polled since the lock ended", p)
				}
			}
			return nil
		})
		t.Logf("%s locked for %v: every member ready and every source polled again %v after", table,
			back.Sub(begun).Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
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
	lost, total := int64(0), 0
	for i, n := range names {
		got, want := final[n].PollsTotal, int64(u.Count(paths[i]))
		total += int(want)
		if got < want {
			lost += want - got
		}
		if got != want {
			t.Errorf("%s: the store counts %d polls, the upstream saw %d", n, got, want)
		}
	}
	t.Logf("polls lost: %d of %d the upstream answered", lost, total)
	for _, m := range ms {
		if l := m.d.logs(); strings.Contains(l, "commits refused") {
			t.Errorf("%s refused commits of its own claims:\n%s", m.name, l)
		}
	}
}

// holdLock locks table (ACCESS EXCLUSIVE) in a transaction of db for hold,
// then commits: every other statement on the table waits meanwhile.
func holdLock(db *sql.DB, table string, hold time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), hold+30*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "SELECT pg_sleep($1)", hold.Seconds()); err != nil {
		return err
	}
	return tx.Commit()
}
