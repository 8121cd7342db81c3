package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestParsedMost: the reload's full collection is made after a load that
// parsed its sources, not after one that reused them from the config in
// force.
func TestParsedMost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	var b strings.Builder
	b.WriteString("sources:\n")
	for _, name := range []string{"a", "b", "c", "d"} {
		b.WriteString("  - {name: " + name + ", type: http, url: \"http://127.0.0.1:1/" + name + "\"}\n")
	}
	text := b.String()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		text string
		want bool
	}{
		{"unchanged", text, false},
		{"one changed", strings.Replace(text, "/a\"", "/a2\"", 1), false},
		{"all changed", strings.ReplaceAll(text, "127.0.0.1:1", "127.0.0.1:2"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.LoadWith(path, nil, config.Options{Previous: first})
			if err != nil {
				t.Fatal(err)
			}
			if got := parsedMost(cfg); got != tc.want {
				t.Errorf("parsedMost = %v (reused %d of %d), want %v", got, cfg.Reused(), len(cfg.Sources), tc.want)
			}
		})
	}
	if !parsedMost(first) {
		t.Error("parsedMost is false for a first load")
	}
}
