package flush

import (
	"testing"

	"github.com/pacer-dev/pacer/internal/sqlitetest"
)

// holdWriteLock takes the write lock of the SQLite file at path from a
// second connection (sqlitetest.HoldWriteLock).
func holdWriteLock(t *testing.T, path string) (release func() error) {
	t.Helper()
	return sqlitetest.HoldWriteLock(t, path)
}
