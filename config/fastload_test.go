package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCutSources checks which texts cutSources cuts and into how many
// items, and that the head keeps everything but the items.
func TestCutSources(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		items      int // -1: not cut
		head       string
	}{
		{"block", "store: x\nsources:\n  - name: a\n    type: http\n  - name: b\n", 2, "store: x\nsources:\n"},
		{"flow items", "sources:\n  - {name: a}\n  - {name: b}\n  - {name: c}\nlimits: {}\n", 3, "sources:\nlimits: {}\n"},
		{"indent 0", "sources:\n- name: a\n  type: http\n- name: b\nlog: {}\n", 2, "sources:\nlog: {}\n"},
		{"comments and blanks", "sources: # the list\n\n  # first\n  - name: a\n\n# a comment\n  - name: b\nlog: {}\n", 2, "sources: # the list\nlog: {}\n"},
		{"crlf", "sources:\r\n  - name: a\r\n  - name: b\r\n", 2, "sources:\r\n"},
		{"no final newline", "sources:\n  - name: a", 1, "sources:\n"},
		{"block scalar", "sources:\n  - name: a\n    body: |\n      - not an item\n\n      x\n  - name: b\n", 2, "sources:\n"},
		{"flow list", "sources: [{name: a}]\n", -1, ""},
		{"empty", "sources:\nlog: {}\n", -1, ""},
		{"not a list", "sources:\n  name: a\n", -1, ""},
		{"tab", "sources:\n\t- name: a\n", -1, ""},
		{"less indented", "sources:\n    - name: a\n  - name: b\n", -1, ""},
		{"continuation at item indent", "sources:\n  - {name: a,\n  type: http}\n", -1, ""},
		{"directive", "%YAML 1.2\n---\nsources:\n  - name: a\n", -1, ""},
		{"no sources", "store: x\n", 0, "store: x\n"},
		{"no sources line", "{store: x, sources: [{name: a}]}\n", 0, "{store: x, sources: [{name: a}]}\n"},
		{"anchored key", "sources: &s\n  - name: a\n", -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl, ok := cutSources([]byte(tc.text))
			if tc.items < 0 {
				if ok {
					t.Fatalf("cut into %d items, want no cut", len(rl.items))
				}
				return
			}
			if !ok || len(rl.items) != tc.items {
				t.Fatalf("ok %v, %d items; want %d", ok, len(rl.items), tc.items)
			}
			if string(rl.head) != tc.head {
				t.Errorf("head %q, want %q", rl.head, tc.head)
			}
			for i := 1; i < len(rl.items); i++ {
				if rl.items[i][0] != rl.items[i-1][1] {
					t.Errorf("item %d starts at %d, item %d ends at %d", i, rl.items[i][0], i-1, rl.items[i-1][1])
				}
			}
		})
	}
}

// manySources returns a sources list of n block items.
func manySources(n int, extra func(i int) string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - name: s%04d\n    type: http\n    url: http://127.0.0.1:1/%d\n%s", i, i, extra(i))
	}
	return b.String()
}

// TestFastLoadSameConfig loads configs through the cut sources list and
// through the whole file's node tree: the configs (or the problems) must be
// equal, and the cut must be used where it applies.
func TestFastLoadSameConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "token", "s3cr3t\n", 0o600)
	writeFile(t, dir, "more.yaml", "sources:\n  - {name: other, type: http, url: \"http://h/\"}\n  - name: other2\n    type: http\n    url: http://h/2\n", 0o600)
	writeFile(t, dir, "flow.yaml", "sources: [{name: flow, type: http, url: \"http://h/f\"}]\n", 0o600)
	env := envMap(map[string]string{"TOKEN": "t0k3n", "HOST": "example.com"})
	big := "defaults: {schedule: \"@every 30s\"}\nlimits: {g: {concurrency: 2}}\nsources:\n" + manySources(1100, func(i int) string {
		switch i % 7 {
		case 1:
			return "    headers: {Authorization: \"Bearer ${TOKEN}\"}\n"
		case 2:
			return "    limit: g\n    schedule: \"*/5 * * * *\"\n"
		case 3:
			return "    body: |\n      line one\n\n      - line two\n"
		case 4:
			return "    expect_status: [200, 204]\n    conditional: false\n"
		}
		return ""
	})
	for _, tc := range []struct {
		name, text string
		fast       bool // the cut list is expected to be used
	}{
		{"big", big, true},
		{"flow items", "sources:\n  - {name: a, type: http, url: \"http://x/\"}\n  - {name: b, type: exec, command: [\"true\"]}\nlog: {level: warn}\n", true},
		{"anchor inside an item", "sources:\n  - &x {name: a, type: http, url: \"http://x/\"}\n  - name: b\n    <<: {type: http, url: \"http://y/\"}\n", true},
		{"env and files", "sources:\n  - name: a\n    type: http\n    url: \"http://${HOST}/\"\n    headers: {X: \"${file:" + filepath.Join(dir, "token") + "}\"}\n", true},
		{"source files", "source_files: [more.yaml]\nsources:\n  - {name: a, type: http, url: \"http://x/\"}\n", true},
		{"only source files", "source_files: [more.yaml, flow.yaml]\nlog: {level: warn}\n", true},
		{"no sources at all", "log: {level: warn}\n", true},
		{"whole document in flow style", "{sources: [{name: a, type: http, url: \"http://x/\"}]}\n", false},
		{"anchor across items of a batch", "sources:\n  - &x {name: a, type: http, url: \"http://x/\"}\n  - {<<: *x, name: b}\n", true},
		{"alias from the head", "defaults: &d {timeout: 5s}\nsources:\n  - {name: a, type: http, url: \"http://x/\", <<: *d}\n", false},
		{"duplicate name", "sources:\n  - {name: a, type: http, url: \"http://x/\"}\n  - {name: a, type: http, url: \"http://y/\"}\n", false},
		{"bad key", "sources:\n  - {name: a, type: http, url: \"http://x/\", bogus: 1}\n", false},
		{"unset variable", "sources:\n  - {name: a, type: http, url: \"http://${NOPE}/\"}\n", false},
		{"syntax error in an item", "sources:\n  - {name: a, type: http\n  - {name: b}\n", false},
		{"duplicate sources key", "sources:\n  - {name: a, type: http, url: \"http://x/\"}\nsources: []\n", false},
		{"two documents", "sources:\n  - {name: a, type: http, url: \"http://x/\"}\n---\nlog: {}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, dir, "config.yaml", tc.text, 0o600)
			abs, _ := filepath.Abs(path)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fast := loadFast(path, abs, data, env, Options{})
			if (fast != nil) != tc.fast {
				t.Fatalf("cut list used: %v, want %v", fast != nil, tc.fast)
			}
			got, gotErr := Load(path, env)
			want, wantErr := loadTree(path, abs, data, env, Options{})
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("error %v\nwant  %v", gotErr, wantErr)
			}
			if got == nil {
				return
			}
			if (got.fast != nil) != tc.fast {
				t.Errorf("Load used the cut list: %v, want %v", got.fast != nil, tc.fast)
			}
			got.fast = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("configs differ:\n got %+v\nwant %+v", got.Sources, want.Sources)
			}
		})
	}
}

// TestLoadReusesUnchangedSources reloads with Options.Previous after each
// edit: the sources whose text and context are unchanged and that read
// nothing outside the file are reused, and the config is the one a load
// from scratch yields.
func TestLoadReusesUnchangedSources(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"TOKEN": "one"}
	env := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	list := func(i int) string {
		switch i {
		case 10:
			return "    headers: {Authorization: \"Bearer ${TOKEN}\"}\n"
		case 20:
			return "    <<: &m {timeout: 3s}\n"
		case 21:
			return "    <<: *m\n"
		}
		return ""
	}
	const n = 600 // three batches
	base := "defaults: {schedule: \"@every 1m\"}\nsources:\n" + manySources(n, list)
	edits := []struct {
		name   string
		text   func() string
		reused int
	}{
		// Sources 20 (an anchor) and 21 (an alias) are always parsed; 10
		// (${TOKEN}) is reused while TOKEN is unchanged.
		{"unchanged", func() string { return base }, n - 2},
		{"one url", func() string { return strings.Replace(base, "/300\n", "/300x\n", 1) }, n - 3},
		{"inserted at the front", func() string {
			return strings.Replace(base, "sources:\n", "sources:\n  - {name: new, type: http, url: \"http://n/\"}\n", 1)
		}, n - 3}, // source 300 is back as it was
		{"environment", func() string { vars["TOKEN"] = "two"; return base }, n - 3},
		{"anchor changed", func() string { return strings.Replace(base, "timeout: 3s", "timeout: 4s", 1) }, n - 2},
		{"renamed", func() string { return strings.Replace(base, "name: s0300\n", "name: s0300b\n", 1) }, n - 3},
		{"defaults", func() string { return strings.Replace(base, "@every 1m", "@every 2m", 1) }, 0},
	}
	path := filepath.Join(dir, "config.yaml")
	var prev *Config
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			text := e.text()
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			if prev == nil {
				var err error
				if prev, err = LoadWith(path, env, Options{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := LoadWith(path, env, Options{Previous: prev})
			if err != nil {
				t.Fatal(err)
			}
			if got.Reused() != e.reused {
				t.Errorf("reused %d sources, want %d", got.Reused(), e.reused)
			}
			// A reused source is the previous config's, not a copy.
			shared := 0
			for _, s := range got.Sources {
				if p, ok := prev.Source(s.Name); ok && p == s {
					shared++
				}
			}
			if shared != e.reused {
				t.Errorf("%d sources are the previous config's, want the %d reused", shared, e.reused)
			}
			abs, _ := filepath.Abs(path)
			want, err := loadTree(path, abs, []byte(text), env, Options{})
			if err != nil {
				t.Fatal(err)
			}
			next := got.fast
			got.fast = nil
			if !reflect.DeepEqual(got, want) {
				for i := range want.Sources {
					if i < len(got.Sources) && !reflect.DeepEqual(got.Sources[i], want.Sources[i]) {
						t.Errorf("sources[%d]: got %+v\nwant %+v", i, got.Sources[i], want.Sources[i])
					}
				}
				t.Fatalf("configs differ")
			}
			got.fast = next
			prev = got
		})
	}
	// Another file with the same text reuses nothing.
	other := writeFile(t, dir, "other.yaml", base, 0o600)
	if got, err := LoadWith(other, env, Options{Previous: prev}); err != nil || got.Reused() != 0 {
		t.Errorf("another file: reused %d (err %v), want 0", got.Reused(), err)
	}
}

// TestReusedSourceKeepsItsSecrets: a reused source records its secrets
// again, also those a source before it recorded first in the previous load.
func TestReusedSourceKeepsItsSecrets(t *testing.T) {
	dir := t.TempDir()
	env := envMap(map[string]string{"TOKEN": "t0k3n-value"})
	item := func(name string) string {
		return "  - {name: " + name + ", type: http, url: \"http://u:p4ssw0rd@h/" + name + "\", headers: {X: \"${TOKEN}\"}}\n"
	}
	texts := []string{"sources:\n" + item("a") + item("b"), "sources:\n" + item("b")}
	path := filepath.Join(dir, "config.yaml")
	var prev *Config
	for i, text := range texts {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := LoadWith(path, env, Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		if want := i; got.Reused() != want {
			t.Errorf("load %d: reused %d, want %d", i, got.Reused(), want)
		}
		abs, _ := filepath.Abs(path)
		want, err := loadTree(path, abs, []byte(text), env, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Secrets, want.Secrets) || !reflect.DeepEqual(got.masks, want.masks) {
			t.Errorf("load %d: secrets %q masks %v, want %q %v", i, got.Secrets, got.masks, want.Secrets, want.masks)
		}
		if r := got.Redactor().Redact("x t0k3n-value p4ssw0rd"); strings.Contains(r, "t0k3n") || strings.Contains(r, "p4ssw0rd") {
			t.Errorf("load %d: a secret is not redacted: %s", i, r)
		}
		prev = got
	}
}

// TestReuseWithDefaultsFromTheEnvironment: defaults that read a variable
// let the sources be reused while it keeps its value, not after it changed.
func TestReuseWithDefaultsFromTheEnvironment(t *testing.T) {
	vars := map[string]string{"EVERY": "1m"}
	env := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	text := "defaults: {schedule: \"@every ${EVERY}\"}\nsources:\n" + manySources(300, func(int) string { return "" })
	path := writeFile(t, t.TempDir(), "config.yaml", text, 0o600)
	prev, err := Load(path, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		every  string
		reused int
	}{{"1m", 300}, {"2m", 0}, {"2m", 300}} {
		vars["EVERY"] = tc.every
		got, err := LoadWith(path, env, Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		if got.Reused() != tc.reused {
			t.Errorf("EVERY=%s: reused %d, want %d", tc.every, got.Reused(), tc.reused)
		}
		if want := "@every " + tc.every; got.Sources[299].ScheduleSpec != want {
			t.Errorf("EVERY=%s: schedule %q, want %q", tc.every, got.Sources[299].ScheduleSpec, want)
		}
		prev = got
	}
}

// FuzzFastLoadSame: whatever config the cut sources list loads (and
// whatever a reload reusing it yields), the whole file's node tree loads
// the same; what it rejects, Load reports as the node tree does.
//
//	go test ./config -run '^$' -fuzz FuzzFastLoadSame -fuzztime 60s
func FuzzFastLoadSame(f *testing.F) {
	f.Add([]byte("sources:\n  - {name: a, type: http, url: \"http://x/${A}\"}\n  - name: b\n    type: http\n    url: http://y/\n    expect_status: [200, 0x10]\n"))
	f.Add([]byte("defaults: {timeout: 5s}\nsources:\n- {name: a, type: exec, command: [\"true\"], env: {K: v}}\nlimits: {g: {rate: 1/s}}\n"))
	f.Add([]byte("sources:\n  - &x {name: a, type: http, url: \"http://x/\"}\n  - {<<: *x, name: b, headers: {A: b}}\n"))
	f.Add([]byte("sources:\n  - {name: a, type: http, url: \"http://x/\", max_body: 1e3, conditional: null, follow_redirects: 012}\n"))
	// Texts that a line-based cut or a subset parser gets wrong easily:
	// comments, '#' and ': ' inside values, block scalars, CRLF, odd
	// scalars (yes, on, ~, octal), non-ASCII, a list indented under its key.
	f.Add([]byte("sources: # the list\n  - name: a   # first\n    type: http\n    url: http://x/p#frag\n    body: \"k: v # not a comment\"\n"))
	f.Add([]byte("sources:\n  - name: a\n    type: http\n    url: 'http://x/it''s'\n    body: |\n      line: one\n      - two\n    headers: {X-A: yes, X-B: on, X-C: ~}\n"))
	f.Add([]byte("sources:\r\n  - name: a\r\n    type: exec\r\n    command: [\"true\"]\r\n    timeout: 010s\r\n"))
	f.Add([]byte("sources:\n- name: \u00e9t\u00e9\n  type: exec\n  command: [\"true\"]\n- name: b\n  type: exec\n  command:\n    - \"true\"\n    - \"--x=a: b\"\n"))
	f.Add([]byte("sources:\n  - name: a\n    type: http\n    url: http://x/\n  -   name: b\n      type: http\n      url: http://y/\n  - {name: c, type: http, url: \"http://z/\"}  # trailing\n"))
	full, err := os.ReadFile("../testdata/config/full.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	dir := f.TempDir()
	path := filepath.Join(dir, "c.yaml")
	abs, _ := filepath.Abs(path)
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := os.WriteFile(path, in, 0o644); err != nil {
			t.Fatal(err)
		}
		fast := loadFast(path, abs, in, fuzzEnv, Options{})
		want, wantErr := loadTree(path, abs, in, fuzzEnv, Options{})
		if fast != nil {
			if wantErr != nil {
				t.Fatalf("the cut list loads %q, the node tree rejects it: %v", in, wantErr)
			}
			again := loadFast(path, abs, in, fuzzEnv, Options{Previous: fast})
			for _, got := range []*Config{fast, again} {
				if got == nil {
					t.Fatalf("the reload of %q failed", in)
				}
				got.fast = nil
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%q: configs differ:\n got %+v\nwant %+v", in, got.Sources, want.Sources)
				}
			}
		}
		got, err := Load(path, fuzzEnv)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || (got == nil) != (want == nil) {
			t.Fatalf("%q: Load = %v, node tree %v", in, err, wantErr)
		}
	})
}

// TestReuseAcrossSourceFiles: the sources of source files are reused as
// the config file's are, also when they move to another file; a file whose
// list cannot be cut is read from its node tree, its sources not reused.
func TestReuseAcrossSourceFiles(t *testing.T) {
	dir := t.TempDir()
	noEnv := func(string) (string, bool) { return "", false }
	file := func(name string, from, to int) {
		var b strings.Builder
		b.WriteString("sources:\n")
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "  - {name: s%03d, type: http, url: \"http://h/%d\"}\n", i, i)
		}
		writeFile(t, dir, name, b.String(), 0o600)
	}
	file("a.yaml", 0, 100)
	file("b.yaml", 100, 200)
	writeFile(t, dir, "c.yaml", "sources: [{name: flow, type: http, url: \"http://h/f\"}]\n", 0o600)
	path := writeFile(t, dir, "config.yaml", "source_files: [\"*.d.yaml\", a.yaml, b.yaml, c.yaml]\n", 0o600)
	prev, err := Load(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		edit   func()
		reused int
	}{
		{"unchanged", func() {}, 200},
		{"one changed", func() {
			file("b.yaml", 100, 199)
			writeFile(t, dir, "z.d.yaml", "sources:\n  - {name: s199, type: http, url: \"http://h/new\"}\n", 0o600)
		}, 199},
		{"moved", func() { file("a.yaml", 0, 150); file("b.yaml", 150, 199) }, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.edit()
			got, err := LoadWith(path, noEnv, Options{Previous: prev})
			if err != nil {
				t.Fatal(err)
			}
			if got.Reused() != tc.reused {
				t.Errorf("reused %d, want %d", got.Reused(), tc.reused)
			}
			abs, _ := filepath.Abs(path)
			data, _ := os.ReadFile(path)
			want, err := loadTree(path, abs, data, noEnv, Options{})
			if err != nil {
				t.Fatal(err)
			}
			next := got.fast
			got.fast = nil
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("configs differ:\n got %+v\nwant %+v", got.Sources, want.Sources)
			}
			got.fast, prev = next, got
		})
	}
}
