package config

import (
	"strings"
	"testing"
)

// TestNullSourcesRefused: a config cut off right after "sources:" (the key
// with nothing, YAML null) and no source from source_files is refused, with
// a message that says how to write a config with no sources on purpose
// ("sources: []"). Before, it loaded with no sources: a SIGHUP in the middle
// of an editor's save stopped every source. An explicit empty list, a null
// list completed by source_files, and a null list in a source file still
// load.
func TestNullSourcesRefused(t *testing.T) {
	const src = "  - {name: a, type: exec, command: [\"true\"]}\n"
	cases := []struct {
		name    string
		yaml    string
		files   map[string]string // extra files in the config's directory
		wantErr bool
		sources int
	}{
		{"cut after sources:", "concurrency: 2\nsources:\n", nil, true, 0},
		{"cut after sources: with a comment", "sources:\n# saving...\n", nil, true, 0},
		{"explicit null", "sources: null\n", nil, true, 0},
		{"tilde", "sources: ~\n", nil, true, 0},
		{"source_files match nothing", "source_files: [\"none/*.yaml\"]\nsources:\n", nil, true, 0},
		{"source file with no source", "source_files: [\"d/*.yaml\"]\nsources:\n",
			map[string]string{"d/x.yaml": "sources: []\n"}, true, 0},
		{"explicit empty list", "sources: []\n", nil, false, 0},
		{"explicit empty block", "concurrency: 2\nsources: []\n", nil, false, 0},
		{"null completed by source_files", "source_files: [\"d/*.yaml\"]\nsources:\n",
			map[string]string{"d/x.yaml": "sources:\n" + src}, false, 1},
		{"null in a source file", "source_files: [\"d/*.yaml\"]\nsources:\n" + src,
			map[string]string{"d/x.yaml": "sources:\n"}, false, 1},
		{"a list", "sources:\n" + src, nil, false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range c.files {
				writeFile(t, dir, name, body, 0o644)
			}
			cfg, ps := loadIn(t, dir, c.yaml, nil)
			if !c.wantErr {
				if ps != nil {
					t.Fatalf("unexpected problems:\n%v", ps)
				}
				if len(cfg.Sources) != c.sources {
					t.Fatalf("%d sources, want %d", len(cfg.Sources), c.sources)
				}
				return
			}
			if ps == nil {
				t.Fatalf("loaded with %d sources, want a problem", len(cfg.Sources))
			}
			if len(ps) != 1 || !strings.Contains(ps[0].String(), "sources") ||
				!strings.Contains(ps[0].Msg, "sources: []") {
				t.Errorf("problems %v, want one naming sources and saying to write \"sources: []\"", ps)
			}
		})
	}
}
