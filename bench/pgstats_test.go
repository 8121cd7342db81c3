package bench

import (
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// pgProbe reads what issue 25's target 7 scales from: the server's CPU,
// its WAL position, the database's commits, the client connections and
// the size of each of pacer's tables, through its own connection (the
// schema of dsn).
type pgProbe struct {
	db  *sql.DB
	cpu func() time.Duration
}

func newPGProbe(b *testing.B, dsn string) *pgProbe {
	b.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = db.Close() })
	return &pgProbe{db: db, cpu: postgresCPU(b, dsn)}
}

// pgMark is the server's counters at one instant.
type pgMark struct {
	at      time.Time
	cpu     time.Duration
	wal     int64 // pg_current_wal_lsn in bytes
	commits int64 // xact_commit of the database
}

func (p *pgProbe) mark(b *testing.B) pgMark {
	b.Helper()
	m := pgMark{at: time.Now(), cpu: p.cpu()}
	err := p.db.QueryRow(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
		(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())`).Scan(&m.wal, &m.commits)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// tables lists pacer's tables in the schema: name, pg_total_relation_size
// and live rows (pg_stat_user_tables' estimate).
func (p *pgProbe) tables(b *testing.B) string {
	b.Helper()
	rows, err := p.db.Query(`SELECT c.relname, pg_total_relation_size(c.oid), COALESCE(s.n_live_tup, 0)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
		WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY 2 DESC`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		var name string
		var size, live int64
		if err := rows.Scan(&name, &size, &live); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&sb, "%s %d B (%d rows); ", name, size, live)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return sb.String()
}

// activity samples pg_stat_activity once a second until stop: the most
// client connections seen, and the share of samples in which a client
// waited on a lock (the shard table's fences are the ones share-locked).
type activity struct {
	stop     chan struct{}
	done     sync.WaitGroup
	samples  int
	lockWait int // samples with a client waiting on a heavyweight lock
	maxConns int
	waitsBy  map[string]int // wait events of active clients, summed over samples
}

func (p *pgProbe) sample() *activity {
	a := &activity{stop: make(chan struct{}), waitsBy: map[string]int{}}
	a.done.Add(1)
	go func() {
		defer a.done.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-tick.C:
				a.once(p.db)
			}
		}
	}()
	return a
}

func (a *activity) once(db *sql.DB) {
	rows, err := db.Query(`SELECT state, COALESCE(wait_event_type, ''), COALESCE(wait_event, '')
		FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`)
	if err != nil {
		return
	}
	defer rows.Close()
	conns, locked := 0, false
	for rows.Next() {
		var state, typ, ev string
		if rows.Scan(&state, &typ, &ev) != nil {
			return
		}
		conns++
		if state == "active" && typ != "" {
			a.waitsBy[typ+":"+ev]++
		}
		locked = locked || typ == "Lock"
	}
	a.samples++
	a.maxConns = max(a.maxConns, conns)
	if locked {
		a.lockWait++
	}
}

func (a *activity) end() string {
	close(a.stop)
	a.done.Wait()
	return fmt.Sprintf("%d samples: at most %d client connections; a client waiting on a lock in %d; active clients' waits %v",
		a.samples, a.maxConns, a.lockWait, a.waitsBy)
}
