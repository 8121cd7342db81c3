// Package pgtest gives tests a PostgreSQL schema of their own on the
// throwaway server that scripts/test.sh starts (PACER_TEST_POSTGRES). It is
// imported by tests only.
package pgtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Missing is the failure of a test that needs the server when it is not
// there: it fails, never skips, and says how to get one.
const Missing = "PACER_TEST_POSTGRES is not set: run scripts/test.sh, which starts a throwaway PostgreSQL 15 (Debian's postgresql-15)"

// Server returns the server's URL, failing t without one.
func Server(t testing.TB) string {
	t.Helper()
	server := os.Getenv("PACER_TEST_POSTGRES")
	if server == "" {
		t.Fatal(Missing)
	}
	return server
}

// Schema creates a schema named prefix + random hex on the server, drops
// it when t ends, and returns the server's URL with search_path set to it.
func Schema(t testing.TB, prefix string) string {
	t.Helper()
	server := Server(t)
	db, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	schema := prefix + RandomHex(6)
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// RandomHex is n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
