package store_test

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/pacer-dev/pacer/internal/pgtest"
	"github.com/pacer-dev/pacer/store"
)

// pgServer returns the URL of the test server (scripts/test.sh starts one
// and sets PACER_TEST_POSTGRES); without it the test fails (a backend that
// is not tested is not known to work).
func pgServer(t testing.TB) string { return pgtest.Server(t) }

// withParam returns the URL u with the query parameter key set to value.
func withParam(t testing.TB, u, key, value string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("%s: %v", "PACER_TEST_POSTGRES", err)
	}
	q := p.Query()
	q.Set(key, value)
	p.RawQuery = q.Encode()
	return p.String()
}

// pgAdmin opens a database/sql connection to the server of PACER_TEST_POSTGRES.
func pgAdmin(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newPostgresDSN creates a schema of its own for the test and returns the
// server's URL with search_path set to it; the schema is dropped when the
// test ends (after the stores opened on it are closed: cleanups run last
// registered first).
func newPostgresDSN(t testing.TB) string { return pgtest.Schema(t, "t_") }

func TestPostgres(t *testing.T) {
	pgServer(t) // one failure, not one per test of the suite, without a server
	runStoreSuite(t, backend{
		newDSN:        func(t *testing.T) string { return newPostgresDSN(t) },
		shown:         store.ShownDSN,
		failRecordsOf: failRecordsOfPostgres,
		checkStored:   historyIsBytea,
	})
}

// failRecordsOfPostgres installs a trigger that aborts every insert of a
// record of source (an upsert fires BEFORE INSERT for each row it proposes).
func failRecordsOfPostgres(t *testing.T, s *store.Store, source string) {
	t.Helper()
	for _, q := range []string{
		"CREATE FUNCTION fail_records() RETURNS trigger LANGUAGE plpgsql AS " +
			"$$ BEGIN RAISE EXCEPTION 'records of % refused by the test', NEW.source; END $$",
		"CREATE TRIGGER fail_records BEFORE INSERT ON history_tail FOR EACH ROW WHEN (NEW.source = '" + source +
			"') EXECUTE FUNCTION fail_records()",
	} {
		if err := store.GormDB(s).Exec(q).Error; err != nil {
			t.Fatalf("create trigger: %v", err)
		}
	}
}

// historyIsBytea checks the column types gorm gave the packed histories,
// and that no stored blob is empty but the tails that were sealed.
func historyIsBytea(t *testing.T, s *store.Store) {
	t.Helper()
	for _, table := range []string{"history_tail", "history_blocks"} {
		var typ string
		q := "SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? AND column_name = 'data'"
		if err := store.GormDB(s).Raw(q, table).Row().Scan(&typ); err != nil {
			t.Fatal(err)
		}
		if typ != "bytea" {
			t.Errorf("%s.data is %s, want bytea", table, typ)
		}
	}
	var n int
	if err := store.GormDB(s).Raw("SELECT COUNT(*) FROM history_blocks WHERE octet_length(data) = 0").Row().Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d empty blocks", n)
	}
}

func TestShownDSN(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"pacer.db", "pacer.db"},
		{"postgres://pacer:s3cr%40t@db.example:5432/pacer?sslmode=require", "postgres://pacer:***@db.example:5432/pacer?sslmode=require"},
		{"postgresql://pacer@/pacer?host=/run/postgresql", "postgresql://pacer@/pacer?host=%2Frun%2Fpostgresql"},
		{"postgres://db.example/pacer?password=hunter2&user=pacer", "postgres://db.example/pacer?password=***&user=pacer"},
		{"postgres://pacer:se cret@db:x/pacer", "postgres://(invalid URL)"},
	} {
		if got := store.ShownDSN(c.dsn); got != c.want {
			t.Errorf("ShownDSN(%q) = %q, want %q", c.dsn, got, c.want)
		}
	}
}

// TestPostgresErrorsHideThePassword: a store that cannot be opened (no such
// database, a URL that does not parse, a schema that does not exist) is
// named in the error without its password.
func TestPostgresErrorsHideThePassword(t *testing.T) {
	server := pgServer(t)
	p, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.UserPassword(p.User.Username(), "hunter2")
	p.Path = "/no_such_database"
	noDB := p.String()
	p.Path = "/postgres"
	noSchema := withParam(t, p.String(), "search_path", "no_such_schema")
	for _, c := range []struct {
		name, dsn, want string
		lockFails       bool // the lock needs no schema: it is taken per search_path
	}{
		{"no database", noDB, `database "no_such_database" does not exist`, true},
		{"bad URL", "postgres://pacer:hunter2@db:x/pacer", "invalid PostgreSQL URL", true},
		{"bad parameter", withParam(t, noDB, "connect_timeout", "soon"), "invalid connect_timeout", true},
		{"no schema", noSchema, "no schema of search_path exists", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := store.Open(c.dsn, store.Options{})
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			if strings.Contains(msg, "hunter2") || !strings.Contains(msg, c.want) {
				t.Errorf("Open error %q: want %q, without the password", msg, c.want)
			}
			l, err := store.AcquireLock(c.dsn)
			switch {
			case err == nil:
				if rerr := l.Release(); rerr != nil || c.lockFails {
					t.Errorf("AcquireLock succeeded; Release: %v", rerr)
				}
			case strings.Contains(err.Error(), "hunter2") || !c.lockFails:
				t.Errorf("AcquireLock error %v: want none or one without the password", err)
			}
		})
	}
}

// TestPostgresConcurrentCreate: three stores opened at once on a new
// schema create it once (the second waits for the first, then finds the
// tables).
func TestPostgresConcurrentCreate(t *testing.T) {
	dsn := newPostgresDSN(t)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			s, err := store.Open(dsn, store.Options{})
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
	s := openAt(t, dsn, store.Options{})
	var n int
	if err := store.GormDB(s).Raw("SELECT COUNT(*) FROM pacer_meta WHERE key = 'schema_version'").Row().Scan(&n); err != nil || n != 1 {
		t.Errorf("schema_version rows = %d, %v; want 1", n, err)
	}
}
