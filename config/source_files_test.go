package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSourceFiles writes n files dir/sources.d/f-NNNN.yaml of per sources
// each, named s-FILE-I, and returns the config's path.
func writeSourceFiles(t testing.TB, dir string, n, per int) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "sources.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f := range n {
		var b strings.Builder
		b.WriteString("sources:\n")
		for i := range per {
			fmt.Fprintf(&b, "  - {name: s-%d-%d, type: http, url: \"http://127.0.0.1:1/%d\"}\n", f, i, i)
		}
		p := filepath.Join(dir, "sources.d", fmt.Sprintf("f-%04d.yaml", f))
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("source_files: [\"sources.d/*.yaml\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSourceFilesThousand: 1,000 source files load, in file order, every
// name found; a name used in two files is reported with both.
func TestSourceFilesThousand(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeSourceFiles(t, dir, 1000, 3)
	cfg, err := Load(cfgPath, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sources) != 3000 || len(cfg.SourceFiles) != 1000 {
		t.Fatalf("%d sources from %d files, want 3000 from 1000", len(cfg.Sources), len(cfg.SourceFiles))
	}
	if cfg.SourceFiles[0] != filepath.Join("sources.d", "f-0000.yaml") || cfg.Sources[2999].Name != "s-999-2" {
		t.Errorf("order: first file %q, last source %q", cfg.SourceFiles[0], cfg.Sources[2999].Name)
	}
	for _, name := range []string{"s-0-0", "s-500-1", "s-999-2"} {
		if s := mustSource(t, cfg, name); s.Name != name {
			t.Errorf("Source(%q) = %q", name, s.Name)
		}
	}
	// A duplicate across files names both places.
	writeFile(t, dir, "sources.d/f-0999.yaml", "sources:\n  - {name: s-3-1, type: http, url: \"http://127.0.0.1:1/\"}\n", 0o644)
	ps := loadProblems(t, cfgPath, nil, Options{})
	want := `sources.d/f-0999.yaml: sources[0].name: duplicate name "s-3-1" (also used by sources[1] of sources.d/f-0003.yaml)`
	if len(ps) != 1 || ps[0].String() != want {
		t.Errorf("problems:\n%v\nwant %s", ps, want)
	}
}

// TestSourceFilesProblems: each problem in a source file starts with that
// file's name relative to the config's directory; every file's problems
// are reported together.
func TestSourceFilesProblems(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "sources.d/a.yaml", "sources:\n  - {name: x, type: http, url: \"ftp://h/\"}\n", 0o644)
	writeFile(t, dir, "sources.d/b.yaml", "defaults: {timeout: 1s}\nsources: []\n", 0o644)
	writeFile(t, dir, "sources.d/c.yaml", "sources:\n  - {name: x, type: exec, command: [/bin/true]}\n", 0o644)
	writeFile(t, dir, "sources.d/d.yaml", "# being written\n", 0o644)
	writeFile(t, dir, "sources.d/e.yaml", "sources: [\n", 0o644)
	writeFile(t, dir, "sources.d/f.yaml", "- {name: y, type: exec, command: [/bin/true]}\n", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "sources.d", "g.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, ps := loadIn(t, dir, `
source_files: ["sources.d/*.yaml", "none.d/*.yaml", "sources.d/[.yaml"]
sources:
  - {name: y, type: exec, command: [/bin/true]}
`, nil)
	want := []string{
		`source_files[2]: invalid pattern "sources.d/[.yaml": syntax error in pattern`,
		`sources.d/a.yaml: sources[name=x].url: invalid URL: unsupported scheme "ftp": must be http or https`,
		`sources.d/b.yaml: defaults: unknown key (a source file holds only a sources list)`,
		`sources.d/c.yaml: sources[0].name: duplicate name "x" (also used by sources[0] of sources.d/a.yaml)`,
		`sources.d/d.yaml: source file is empty (no YAML content, only white space or comments; write "sources: []" for none)`,
		`sources.d/e.yaml:1: did not find expected node content`,
		`sources.d/f.yaml: expected a mapping with a sources list at the top level, got a list`,
		`sources.d/g.yaml: cannot read source file: is a directory`,
	}
	got := make([]string, len(ps))
	for i, p := range ps {
		got[i] = p.String()
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSourceFilesNoMatch: a pattern that matches nothing is no problem,
// but a note; a config without source_files has no notes.
func TestSourceFilesNoMatch(t *testing.T) {
	dir := t.TempDir()
	cfg, ps := loadIn(t, dir, "source_files: [\"empty.d/*.yaml\"]\nsources:\n  - {name: a, type: exec, command: [/bin/true]}\n", nil)
	if ps != nil {
		t.Fatal(ps)
	}
	if len(cfg.Sources) != 1 || len(cfg.Notes) != 1 || cfg.Notes[0] != `source_files[0]: pattern "empty.d/*.yaml" matches no file` {
		t.Errorf("sources %d, notes %q", len(cfg.Sources), cfg.Notes)
	}
	if cfg := mustLoad(t, "sources: []\n", nil); cfg.Notes != nil || cfg.SourceFiles != nil {
		t.Errorf("notes %q, files %q", cfg.Notes, cfg.SourceFiles)
	}
}

// TestSourceFilesTooMany: more than MaxSourceFiles files is a problem, and
// none of them is read.
func TestSourceFilesTooMany(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "many")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range MaxSourceFiles + 1 {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("%05d.yaml", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, ps := loadIn(t, dir, "source_files: [\"many/*.yaml\"]\n", nil)
	want := fmt.Sprintf("source_files: the patterns match %d files, more than the limit of %d", MaxSourceFiles+1, MaxSourceFiles)
	if len(ps) != 1 || ps[0].String() != want {
		t.Errorf("problems: %v", ps)
	}
}

// TestSourceFilesForStore: the store commands read the source files too
// (names, types, schedules), with the polls' variables missing.
func TestSourceFilesForStore(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "sources.d/a.yaml", `sources:
  - {name: a, type: http, url: "http://127.0.0.1:1/", headers: {X-Key: "${KEY}"}, schedule: "@every 5s"}
  - {name: b, type: http, url: "http://127.0.0.1:1/", headers: {X-Key: "${file:missing.key}"}}
`, 0o644)
	p := writeFile(t, dir, "config.yaml", "source_files: [\"sources.d/*.yaml\"]\n", 0o644)
	cfg, err := LoadWith(p, envMap(nil), Options{ForStore: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sources) != 2 || mustSource(t, cfg, "a").ScheduleSpec != "@every 5s" || mustSource(t, cfg, "b").Fingerprint != "" {
		t.Errorf("sources %+v", cfg.Sources)
	}
	ps := loadProblems(t, p, nil, Options{})
	if len(ps) != 2 || !hasPrefix(ps, "sources.d/a.yaml: sources[name=a].headers.X-Key: environment variable KEY is not set") ||
		!hasPrefix(ps, "sources.d/a.yaml: sources[name=b].headers.X-Key: ${file:missing.key}: cannot read "+filepath.Join(dir, "missing.key")) {
		t.Errorf("problems: %v", ps)
	}
	// A schedule stays strict: its problem is kept, with the file's name.
	writeFile(t, dir, "sources.d/a.yaml", "sources:\n  - {name: a, type: exec, command: [x], schedule: \"${S}\"}\n", 0o644)
	ps = loadProblems(t, p, nil, Options{ForStore: true})
	if len(ps) != 1 || !hasPrefix(ps, "sources.d/a.yaml: sources[name=a].schedule: environment variable S is not set") {
		t.Errorf("problems: %v", ps)
	}
}

// loadProblems loads path with env (and opts) and returns its problems,
// failing when it loads.
func loadProblems(t *testing.T, path string, env map[string]string, opts Options) Problems {
	t.Helper()
	cfg, err := LoadWith(path, envMap(env), opts)
	_, ps := checkResult(t, cfg, err)
	if ps == nil {
		t.Fatalf("%s loaded, want problems", path)
	}
	return ps
}

// TestSplitBenchConfig: the benchmark's two configs hold the same sources,
// with the same fingerprints (a source moved to a file is unchanged).
func TestSplitBenchConfig(t *testing.T) {
	one, split := splitBenchConfig(t, t.TempDir(), 1000, 10)
	env := envMap(map[string]string{"TOKEN": "t0k3n-s3cr3t"})
	c1, err := Load(one, env)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Load(split, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(c1.Sources) != 1000 || len(c2.Sources) != 1000 || len(c2.SourceFiles) != 10 {
		t.Fatalf("%d and %d sources, %d files", len(c1.Sources), len(c2.Sources), len(c2.SourceFiles))
	}
	for i := range c1.Sources {
		if a, b := c1.Sources[i], c2.Sources[i]; a.Name != b.Name || a.Fingerprint != b.Fingerprint || a.Fingerprint == "" {
			t.Fatalf("source %d: %s %q vs %s %q", i, a.Name, a.Fingerprint, b.Name, b.Fingerprint)
		}
	}
}
