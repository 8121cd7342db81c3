// Package sqlitetest holds the tests' ways to disturb a SQLite store from
// outside it. It is imported by tests only.
package sqlitetest

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the "sqlite3" driver
)

// HoldWriteLock takes the write lock of the SQLite file at path from a
// second, independent connection (BEGIN IMMEDIATE), so that the store's
// writes wait for it and then fail. release rolls back, freeing the lock;
// it is also called when the test ends.
func HoldWriteLock(t *testing.T, path string) (release func() error) {
	t.Helper()
	db, err := sql.Open("sqlite3", path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	held := true
	release = func() error {
		if !held {
			return nil
		}
		held = false
		_, err := conn.ExecContext(context.Background(), "ROLLBACK")
		return err
	}
	t.Cleanup(func() {
		_ = release()
		_ = conn.Close()
		_ = db.Close()
	})
	return release
}
