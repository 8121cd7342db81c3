package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultStore checks where the store is without a store key: under
// systemd ($STATE_DIRECTORY set, colon-separated when StateDirectory= names
// several) pacer.db in its first directory, else pacer.db next to the
// config file; a store key always wins. PeekStore agrees with Load.
func TestDefaultStore(t *testing.T) {
	t.Parallel()
	const src = "sources:\n  - {name: a, type: http, url: \"http://127.0.0.1:1/\"}\n"
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       string // relative to the config's directory unless absolute
		peek       bool   // PeekStore is sure of it
	}{
		{"no systemd", src, nil, "pacer.db", false},
		{"systemd", src, map[string]string{"STATE_DIRECTORY": "/var/lib/pacer"}, "/var/lib/pacer/pacer.db", true},
		{"several directories", src, map[string]string{"STATE_DIRECTORY": "/var/lib/pacer:/var/lib/other"}, "/var/lib/pacer/pacer.db", true},
		{"unclean directory", src, map[string]string{"STATE_DIRECTORY": "/var/lib/pacer/"}, "/var/lib/pacer/pacer.db", true},
		{"empty", src, map[string]string{"STATE_DIRECTORY": ""}, "pacer.db", true},
		{"empty first", src, map[string]string{"STATE_DIRECTORY": ":/var/lib/pacer"}, "pacer.db", true},
		{"store key wins", "store: mine.db\n" + src, map[string]string{"STATE_DIRECTORY": "/var/lib/pacer"}, "mine.db", true},
		{"absolute store key wins", "store: /srv/p.db\n" + src, map[string]string{"STATE_DIRECTORY": "/var/lib/pacer"}, "/srv/p.db", true},
		{"postgres wins", "store: postgres://h/db\n" + src, map[string]string{"STATE_DIRECTORY": "/var/lib/pacer"}, "postgres://h/db", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg, ps := loadIn(t, dir, tc.yaml, tc.env)
			if ps != nil {
				t.Fatalf("Load: %v", ps)
			}
			want := tc.want
			if !filepath.IsAbs(want) && !strings.Contains(want, "://") {
				want = filepath.Join(dir, want)
			}
			if cfg.Store != want {
				t.Errorf("Store = %q, want %q", cfg.Store, want)
			}
			got, ok := PeekStore(filepath.Join(dir, "config.yaml"), envMap(tc.env))
			if ok != tc.peek || (ok && got != cfg.Store) {
				t.Errorf("PeekStore = %q, %v; Load says %q (want PeekStore ok=%v)", got, ok, cfg.Store, tc.peek)
			}
		})
	}
}
