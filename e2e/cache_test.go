package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuiltFromTrackedSources reads the sources the binary under test is
// built from. go test caches a package's result keyed on its own
// dependencies and on the files its tests open; the binary is built by
// TestMain through the go command, so without this a change to the daemon's
// code would leave a cached e2e result in place.
func TestBuiltFromTrackedSources(t *testing.T) {
	if os.Getenv("PACER_E2E_BIN") != "" {
		t.Log("testing a binary built elsewhere: nothing to track")
		return
	}
	n := 0
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != ".." || d.Name() == "testdata" || d.Name() == "e2e") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			if _, err := os.Stat(p); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("found %d source files of the daemon; the walk is looking in the wrong place", n)
	}
}
