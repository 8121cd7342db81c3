package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pacer-dev/pacer/store/postgres"
)

// The daemon lock of a PostgreSQL store (rule 3.13 until the cluster of
// section 8 exists): a session-level advisory lock, held by a connection
// of its own from AcquireLock to Release. The server drops it when that
// connection ends, also when the process is killed, so a killed daemon's
// lock never blocks the next start. The key is per database and schema
// (search_path), so that stores side by side in one database do not
// exclude each other. The holder names itself in its session's
// application_name ("pacer pid=N host=H"), which Holder and the error of a
// second AcquireLock read from pg_stat_activity.

// pgLockKey is the two-part key of the advisory lock: "pacr", then a hash
// of the store's schema.
const pgLockKey = "1885430642, hashtext(coalesce(current_schema(), current_setting('search_path')))"

// pgHolderSQL reads the application_name of the session that holds the
// lock of this database and schema; no row: nobody holds it.
const pgHolderSQL = "SELECT coalesce(a.application_name, '') FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid " +
	"WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 " +
	"AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) " +
	"AND l.classid = 1885430642::oid AND l.objid = hashtext(coalesce(current_schema(), current_setting('search_path')))::oid LIMIT 1"

// pgLockCheck is how often the holder checks that its lock connection is
// alive, and takes the lock again on a new one when it is not (a restart
// of the server ends every session, and with it the lock).
const pgLockCheck = 5 * time.Second

// pgLock is the PostgreSQL part of a Lock: the connection that holds the
// advisory lock, and the goroutine that keeps it.
type pgLock struct {
	cfg  *pgx.ConnConfig
	try  string // the function that takes the lock (exclusive or shared)
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex // guards conn between keep and release
	conn *pgx.Conn
}

// pgAppName is the application_name of a lock's session, at most 63 bytes
// (PostgreSQL truncates longer names).
func pgAppName(pid int, host string) string {
	s := "pacer pid=" + strconv.Itoa(pid) + " host=" + host
	return s[:min(len(s), 63)]
}

// parsePgAppName reads a pgAppName back; pid 0 when it is not one.
func parsePgAppName(s string) (pid int, host string) {
	rest, ok := strings.CutPrefix(s, "pacer pid=")
	if !ok {
		return 0, ""
	}
	p, h, _ := strings.Cut(rest, " host=")
	pid, err := strconv.Atoi(p)
	if err != nil {
		return 0, ""
	}
	return pid, h
}

// acquirePostgresLock is AcquireLock for a PostgreSQL store.
func acquirePostgresLock(dsn string) (*Lock, error) {
	return acquirePostgresLockWith(dsn, "pg_try_advisory_lock")
}

// acquirePostgresLockWith takes the store's advisory lock with try, the
// exclusive (a single daemon) or the shared (a cluster member) function.
func acquirePostgresLockWith(dsn, try string) (*Lock, error) {
	d, err := postgres.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: lock %s: %w", d.Shown, err)
	}
	cfg, err := postgres.ConnConfig(dsn, d)
	if err != nil {
		return nil, fmt.Errorf("store: lock %s: %w", d.Shown, err)
	}
	host, _ := os.Hostname()
	cfg.RuntimeParams["application_name"] = pgAppName(os.Getpid(), host)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ConnectTimeout+5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: lock %s: %w", d.Shown, d.Scrub(err))
	}
	// The holder may let go between a refused try and the read of its
	// name: try again then, a few times.
	for range 3 {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT "+try+"("+pgLockKey+")").Scan(&ok); err != nil {
			return nil, errors.Join(fmt.Errorf("store: lock %s: %w", d.Shown, d.Scrub(err)), conn.Close(ctx))
		}
		if ok {
			l := &pgLock{cfg: cfg, conn: conn, try: try, stop: make(chan struct{}), done: make(chan struct{})}
			go l.keep()
			return &Lock{pg: l}, nil
		}
		pid, host, held, err := pgHolderOn(ctx, conn)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("store: lock %s: %w", d.Shown, d.Scrub(err)), conn.Close(ctx))
		}
		if held {
			return nil, errors.Join(&LockedError{Store: d.Shown, PID: pid, Host: host}, conn.Close(ctx))
		}
	}
	return nil, errors.Join(&LockedError{Store: d.Shown}, conn.Close(ctx))
}

// pgHolderOn reads, on conn, who holds the lock of conn's store.
func pgHolderOn(ctx context.Context, conn *pgx.Conn) (pid int, host string, held bool, err error) {
	var app string
	err = conn.QueryRow(ctx, pgHolderSQL).Scan(&app)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, err
	}
	pid, host = parsePgAppName(app)
	return pid, host, true, nil
}

// postgresHolder is Holder for a PostgreSQL store.
func postgresHolder(dsn string) (pid int, held bool, err error) {
	d, err := postgres.ParseDSN(dsn)
	if err != nil {
		return 0, false, fmt.Errorf("store: lock holder %s: %w", d.Shown, err)
	}
	cfg, err := postgres.ConnConfig(dsn, d)
	if err != nil {
		return 0, false, fmt.Errorf("store: lock holder %s: %w", d.Shown, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ConnectTimeout+5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, false, fmt.Errorf("store: lock holder %s: %w", d.Shown, d.Scrub(err))
	}
	pid, _, held, err = pgHolderOn(ctx, conn)
	if cerr := conn.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: lock holder %s: %w", d.Shown, d.Scrub(err))
	}
	return pid, held, nil
}

// keep checks the lock's connection every pgLockCheck until release; when
// the connection is gone (and the lock with it), it connects again and
// takes the lock again if it is free. What it cannot take back is the
// cluster's business (section 8), not this lock's.
func (l *pgLock) keep() {
	defer close(l.done)
	t := time.NewTicker(pgLockCheck)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		l.check()
		l.mu.Unlock()
	}
}

// check is one round of keep, under l.mu.
func (l *pgLock) check() {
	ctx, cancel := context.WithTimeout(context.Background(), pgLockCheck)
	defer cancel()
	if l.conn != nil && l.conn.Ping(ctx) == nil {
		return
	}
	if l.conn != nil {
		_ = l.conn.Close(ctx) // already broken
		l.conn = nil
	}
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return // the server is away: the next round tries again
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT "+l.try+"("+pgLockKey+")").Scan(&ok); err != nil || !ok {
		_ = conn.Close(ctx) // another process took it meanwhile, or the server went again
		return
	}
	l.conn = conn
}

// release stops keep and closes the connection, which drops the lock.
func (l *pgLock) release() error {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The server ends a closed connection's session, and with it the lock,
	// only once it has noticed the close: unlock first, so that the store
	// is free when Release returns (a Holder right after it sees it free).
	// The connection holds nothing else. If the unlock fails the
	// connection is broken, and the server drops the session by itself.
	_, _ = l.conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	err := l.conn.Close(ctx)
	l.conn = nil
	if err != nil {
		return fmt.Errorf("store: release lock: %w", err)
	}
	return nil
}
