package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPeekStore(t *testing.T) {
	dir := t.TempDir()
	const src = "sources:\n  - {name: a, type: http, url: \"http://127.0.0.1:1/\", schedule: \"@every 1m\"}\n"
	for _, tc := range []struct {
		name, yaml string
		want       string // relative to dir unless absolute; "" = not ok
	}{
		{"relative", "store: data/p.db\n" + src, "data/p.db"},
		{"absolute", "store: /var/lib/pacer/p.db\n" + src, "/var/lib/pacer/p.db"},
		{"double quoted with comment", "# c\nstore: \"q.db\" # the store\n" + src, "q.db"},
		{"single quoted", "store: 'x y.db'\n" + src, "x y.db"},
		{"after the sources", src + "store: last.db\n", "last.db"},
		{"unclean absolute", "store: /tmp/../tmp/./p.db\n" + src, "/tmp/p.db"},
		{"variable", "store: ${DIR}/p.db\n" + src, ""},
		{"absent: default, but not certain", src, ""},
		{"nested key only", "defaults:\n  store: x.db\n" + src, ""},
		{"twice", "store: a.db\nstore: b.db\n" + src, ""},
		{"empty", "store: \"\"\n" + src, ""},
		{"postgres", "store: postgres://u@h/db\n" + src, ""},
		{"block scalar", "store: |\n  x.db\n" + src, ""},
		{"alias", "store: *a\n" + src, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			got, ok := PeekStore(path, nil)
			if tc.want == "" {
				if ok {
					t.Errorf("PeekStore = %q, true; want not ok", got)
				}
				return
			}
			want := tc.want
			if !filepath.IsAbs(want) {
				want = filepath.Join(dir, want)
			}
			if !ok || got != want {
				t.Fatalf("PeekStore = %q, %v; want %q", got, ok, want)
			}
			// What Load decides is the reference.
			cfg, err := Load(path, func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if cfg.Store != got {
				t.Errorf("PeekStore = %q, Load says %q", got, cfg.Store)
			}
		})
	}
	if _, ok := PeekStore(filepath.Join(dir, "missing.yaml"), nil); ok {
		t.Error("PeekStore of a missing file is ok")
	}
}

// A password written in a PostgreSQL store URL is a secret: it is masked
// like a ${VAR} value or a header.
func TestStorePasswordIsSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.yaml")
	yaml := "store: POSTGRES://pacer:s3cr3t-pw@db.example/pacer\nsources:\n  - {name: a, type: http, url: \"http://127.0.0.1:1/\", schedule: \"@every 1m\"}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != "POSTGRES://pacer:s3cr3t-pw@db.example/pacer" {
		t.Errorf("Store = %q; a PostgreSQL URL is kept as written, not resolved as a path", cfg.Store)
	}
	if got := cfg.Redactor().Redact("open store " + cfg.Store); strings.Contains(got, "s3cr3t-pw") {
		t.Errorf("the store password is not masked: %s", got)
	}
}
