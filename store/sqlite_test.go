package store_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// openSQLite opens a new store in a file of its own, closed at the end of
// the test.
func openSQLite(t *testing.T) *store.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "pacer.db"), store.Options{})
}

func openAt(t *testing.T, path string, opts store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestSQLite(t *testing.T) {
	runStoreSuite(t, backend{
		newDSN:        func(t *testing.T) string { return filepath.Join(t.TempDir(), "pacer.db") },
		shown:         func(dsn string) string { return dsn },
		failRecordsOf: failRecordsOfSQLite,
		checkStored:   historyIsBlobs,
		afterCrash: func(t *testing.T, dsn string) {
			// The commit sits in the WAL, which the next open recovers.
			if fi, err := os.Stat(dsn + "-wal"); err != nil || fi.Size() == 0 {
				t.Errorf("no WAL after the crash: %v", err)
			}
		},
	})
}

// historyIsBlobs checks that the tails and blocks stay BLOBs: SQLite's ||
// makes TEXT, whose length() stops at a NUL byte.
func historyIsBlobs(t *testing.T, s *store.Store) {
	t.Helper()
	for _, table := range []string{"history_tail", "history_blocks"} {
		var n int
		if err := store.GormDB(s).Raw("SELECT COUNT(*) FROM " + table + " WHERE typeof(data) <> 'blob'").Row().Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d rows whose data is not a BLOB", table, n)
		}
	}
}

// failRecordsOfSQLite installs a trigger that aborts every insert of a
// record of source.
func failRecordsOfSQLite(t *testing.T, s *store.Store, source string) {
	t.Helper()
	q := "CREATE TRIGGER fail_records BEFORE INSERT ON history_tail WHEN NEW.source = '" + source +
		"' BEGIN SELECT RAISE(ABORT, 'records of " + source + " refused by the test'); END"
	if err := store.GormDB(s).Exec(q).Error; err != nil {
		t.Fatalf("create trigger: %v", err)
	}
}

// pragma reads one pragma on the store's own connection.
func pragma(t *testing.T, s *store.Store, name string) string {
	t.Helper()
	var v string
	if err := store.GormDB(s).Raw("PRAGMA " + name).Row().Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

func TestSQLiteSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	s := openAt(t, path, store.Options{})
	for name, want := range map[string]string{
		"journal_mode": "wal",
		"synchronous":  "1", // NORMAL
		"foreign_keys": "1",
		"busy_timeout": "5000",
	} {
		if got := pragma(t, s, name); got != want {
			t.Errorf("PRAGMA %s = %s, want %s", name, got, want)
		}
	}
	// WAL is a property of the file: another connection sees it too.
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode seen from another connection = %q, %v; want wal", mode, err)
	}

	s2 := openAt(t, filepath.Join(t.TempDir(), "pacer.db"), store.Options{BusyTimeout: 100 * time.Millisecond})
	if got := pragma(t, s2, "busy_timeout"); got != "100" {
		t.Errorf("busy_timeout with Options.BusyTimeout 100ms = %s", got)
	}
}

func TestSQLiteOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?with#odd%chars")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "p?x#y%20.db")
	s := openAt(t, path, store.Options{})
	save(t, s, []domain.SourceState{fullState("a")}, nil, 10)
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not at its path: %v", err)
	}
	rel, err := filepath.Rel(mustGetwd(t), path)
	if err != nil {
		t.Fatal(err)
	}
	s2 := openAt(t, rel, store.Options{})
	mustGet(t, s2, "a")
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

func TestSQLiteOpenErrors(t *testing.T) {
	if _, err := store.Open("", store.Options{}); err == nil {
		t.Error("Open(\"\") succeeded")
	}
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "pacer.db")
	_, err := store.Open(missing, store.Options{})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Open in a missing directory = %v; want an error naming the path", err)
	}
}

// TestSQLiteReadOnly: a database SQLite may not write (opened with mode=ro,
// which is what SQLite falls back to for a file without write permission;
// chmod would not do as tests run as root) still reads, and every write
// fails with an error.
func TestSQLiteReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	s, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	save(t, s, []domain.SourceState{fullState("a")}, nil, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := store.OpenReadOnly(path, store.Options{})
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	t.Cleanup(func() {
		if err := ro.Close(); err != nil {
			t.Error(err)
		}
	})
	if states, err := ro.LoadStates(t.Context()); err != nil || len(states) != 1 {
		t.Errorf("LoadStates read-only = %d, %v", len(states), err)
	}
	err = ro.Writable(t.Context())
	if err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("Writable on a read-only database = %v; want a readonly error", err)
	}
	t.Logf("expected error: %v", err)
	if err := ro.SaveBatch(t.Context(), []domain.SourceState{fullState("b")}, nil, 10); err == nil {
		t.Error("SaveBatch on a read-only database succeeded")
	}
	if err := ro.EnqueueCommand(t.Context(), &domain.Command{Source: "a", Action: "reset"}); err == nil {
		t.Error("EnqueueCommand on a read-only database succeeded")
	}
}

// TestSQLiteFull: with the database at its maximum size (max_page_count on
// the store's connection), SaveBatch and Writable fail with SQLITE_FULL,
// the failed batch leaves nothing, and writes work again once there is room.
func TestSQLiteFull(t *testing.T) {
	s := openSQLite(t)
	save(t, s, []domain.SourceState{fullState("before")}, nil, 10)
	db := store.GormDB(s)
	pages := pragma(t, s, "page_count")
	if err := db.Exec("PRAGMA max_page_count = " + pages).Error; err != nil {
		t.Fatal(err)
	}
	// An in-place update needs no new page, so the heartbeat row could still
	// be written in a database at its maximum size while pages have room.
	// Fill the meta table's page to the brim so that the heartbeat needs a
	// page too, as every write does on a full disk.
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("the meta table never filled up")
		}
		if err := db.Exec("INSERT INTO pacer_meta (key) VALUES (?)", fmt.Sprint(i)).Error; err != nil {
			if !strings.Contains(err.Error(), "full") {
				t.Fatalf("filling: %v", err)
			}
			break
		}
	}

	err := s.Writable(t.Context())
	if err == nil || !strings.Contains(err.Error(), "database or disk is full") {
		t.Errorf("Writable on a full database = %v; want SQLITE_FULL", err)
	}
	t.Logf("expected error: %v", err)
	var batch []domain.SourceState
	for i := range 1000 {
		batch = append(batch, fullState(fmt.Sprint("s", i)))
	}
	err = s.SaveBatch(t.Context(), batch, []domain.PollRecord{record("before", base(), domain.OutcomeSuccess)}, 10)
	if err == nil || !strings.Contains(err.Error(), "database or disk is full") {
		t.Errorf("SaveBatch on a full database = %v; want SQLITE_FULL", err)
	}
	t.Logf("expected error: %v", err)
	if states, err := s.LoadStates(t.Context()); err != nil || len(states) != 1 {
		t.Errorf("after a failed batch: %d states, %v; want the 1 from before", len(states), err)
	}

	if err := db.Exec("PRAGMA max_page_count = 1000000").Error; err != nil {
		t.Fatal(err)
	}
	save(t, s, batch, nil, 10)
	if err := s.Writable(t.Context()); err != nil {
		t.Errorf("Writable with room again: %v", err)
	}
}

// TestSQLiteBusy: while another connection holds a write transaction,
// SaveBatch waits the busy timeout and fails; once the other commits, it
// succeeds.
func TestSQLiteBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	const timeout = 100 * time.Millisecond
	s := openAt(t, path, store.Options{BusyTimeout: timeout})

	other, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate&_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec("INSERT INTO pacer_meta (key, value) VALUES ('holder', 'x')"); err != nil {
		t.Fatal(err)
	}

	// Readers are not blocked (WAL).
	if _, err := s.LoadStates(t.Context()); err != nil {
		t.Errorf("LoadStates while another connection writes: %v", err)
	}
	start := time.Now()
	err = s.SaveBatch(t.Context(), []domain.SourceState{fullState("a")}, []domain.PollRecord{record("a", base(), domain.OutcomeSuccess)}, 10)
	elapsed := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("SaveBatch while another connection writes = %v; want 'database is locked'", err)
	}
	t.Logf("expected error after %v: %v", elapsed, err)
	if elapsed < timeout*8/10 || elapsed > 3*time.Second {
		t.Errorf("SaveBatch failed after %v; want about the busy timeout %v", elapsed, timeout)
	}
	if err := s.Writable(t.Context()); err == nil {
		t.Error("Writable while another connection writes succeeded")
	}

	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	save(t, s, []domain.SourceState{fullState("a")}, []domain.PollRecord{record("a", base(), domain.OutcomeSuccess)}, 10)
	mustGet(t, s, "a")
	if err := s.Writable(t.Context()); err != nil {
		t.Errorf("Writable after the other committed: %v", err)
	}
}
