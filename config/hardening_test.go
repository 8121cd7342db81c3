package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadPath loads the file at p and returns its problems (nil: it loaded).
func loadPath(t *testing.T, p string) (*Config, Problems) {
	t.Helper()
	cfg, err := Load(p, envMap(nil))
	return checkResult(t, cfg, err)
}

// TestConfigFileMustBeRegularAndBounded: /dev/zero, a FIFO and a directory
// are refused at once (before, /dev/zero was read until memory ran out and a
// FIFO blocked Load), and the size cap is stated.
func TestConfigFileMustBeRegularAndBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, path, want string }{
		{"dev zero", "/dev/zero", "not a regular file (a character device)"},
		{"fifo", fifo, "not a regular file (a FIFO)"},
		{"directory", dir, "is a directory"},
		{"missing", filepath.Join(dir, "nope.yaml"), "cannot read config file: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan Problems, 1)
			go func() {
				_, ps := loadPath(t, c.path)
				done <- ps
			}()
			var ps Problems
			select {
			case ps = <-done:
			case <-time.After(30 * time.Second): // a FIFO open blocks forever
				t.Fatal("Load did not return")
			}
			if len(ps) != 1 || ps[0].Path != c.path || !strings.Contains(ps[0].Msg, c.want) {
				t.Errorf("got %v, want %s: ...%s", ps, c.path, c.want)
			}
		})
	}
	// Over the cap: a sparse file costs no disk.
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxConfigSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, ps := loadPath(t, big); len(ps) != 1 || !strings.Contains(ps[0].Msg, "larger than the limit of 256 MiB") {
		t.Errorf("big file: %v", ps)
	}
	if _, ok := PeekStore("/dev/zero", envMap(nil)); ok {
		t.Error("PeekStore read /dev/zero")
	}
}

// TestEmptyConfig: a file with nothing in it (a half-written file during a
// SIGHUP) is a problem, not a config without sources.
func TestEmptyConfig(t *testing.T) {
	for _, c := range []string{"", "\n\n  \t\n", "# only a comment\n  # another\n", "---\n", "--- # c\n...\n"} {
		_, ps := loadIn(t, t.TempDir(), c, nil)
		if len(ps) != 1 || !strings.HasSuffix(ps[0].Path, "config.yaml") || !strings.HasPrefix(ps[0].Msg, "config is empty") {
			t.Errorf("%q: got %v", c, ps)
		}
	}
	for _, c := range []string{"{}\n", "concurrency: 1\n"} {
		if _, ps := loadIn(t, t.TempDir(), c, nil); ps != nil {
			t.Errorf("%q: %v", c, ps)
		}
	}
}

// TestSyntaxErrorLine: a syntax error names the line of the problem, not
// the line where the enclosing block began (yaml.v3's context mark).
func TestSyntaxErrorLine(t *testing.T) {
	cases := []struct {
		name, yaml string
		line       string
	}{
		{"bad indent line 4", "concurrency: 1\nsources:\n  - name: a\n   type: http\n", "4"},
		{"bad indent line 6", "store: a\nconcurrency: 2\nsources:\n  - name: x\n    type: http\n   url: y\n", "6"},
		{"mapping value", "sources:\n  - name: x\n    type: http\n      url: y\n", "4"},
		{"after a flow list", "a: [1,\n  2]\nb:\n  c: 2\n d: 3\n", "5"},
		{"dedent in a list", "a: 1\nb:\n  - x\n  - y\n c: 3\n", "5"},
		{"tab", "a: 1\n\tb: 2\n", "2"},
		{"unterminated quote", "a:\n  b: 1\n  c: \"x\n", "3"},
		{"first line", "- a\nb: 1\n", "2"},
	}
	var long strings.Builder
	long.WriteString("sources:\n")
	for i := range 1000 { // lines 2..3001
		fmt.Fprintf(&long, "  - name: s%d\n    type: exec\n    command: [\"true\"]\n", i)
	}
	long.WriteString("  - name: bad\n   type: http\n") // line 3003
	cases = append(cases, struct {
		name, yaml string
		line       string
	}{"far from the block's start", long.String(), "3003"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeFile(t, dir, "c.yaml", c.yaml, 0o644)
			_, ps := loadPath(t, p)
			if len(ps) != 1 || ps[0].Path != p+":"+c.line {
				t.Errorf("got %v, want %s:%s: ...", ps, p, c.line)
			}
		})
	}
}

// TestURLProblems: an invalid URL says what is wrong with it.
func TestURLProblems(t *testing.T) {
	cases := []struct{ url, want string }{
		{"example.com/x", "invalid URL: missing scheme: write http://HOST/... or https://HOST/..."},
		{"//example.com/x", "invalid URL: missing scheme"},
		{"ftp://example.com/x", `invalid URL: unsupported scheme "ftp": must be http or https`},
		{"http:///x", "invalid URL: missing host"},
		{"http://:80/x", "invalid URL: missing host"},
		{"https://exa mple.com/", "invalid URL: contains a space (write it as %20)"},
		{"https://example.com/a b", "invalid URL: contains a space"},
		{"https://example.com/\x01", "invalid URL: contains a control character"},
		{"http://example.com:99999/", "invalid URL: port must be 1..65535"},
		{"http://example.com:0/", "invalid URL: port must be 1..65535"},
		{"http://example.com:x/", `invalid URL: invalid port ":x" after host`},
		{"http://[::1/", "invalid URL: missing ']' in host"},
		{"", "invalid URL: empty"},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			ps := mustFail(t, "sources:\n  - {name: a, type: http, url: "+quoteYAML(c.url)+"}\n", nil)
			if len(ps) != 1 || ps[0].Path != "sources[name=a].url" || !strings.HasPrefix(ps[0].Msg, c.want) {
				t.Errorf("got %v, want sources[name=a].url: %s", ps, c.want)
			}
		})
	}
	for _, ok := range []string{"HTTP://Example.com", "https://u:p@example.com:8443/a%20b?q=1#f", "http://[::1]:8080/"} {
		mustLoad(t, "sources:\n  - {name: a, type: http, url: "+quoteYAML(ok)+"}\n", nil)
	}
	// A URL holding a secret is described without quoting any part of it.
	ps := mustFail(t, "sources:\n  - {name: a, type: http, url: \"http://h:${P}/\"}\n", map[string]string{"P": "s3cr"})
	if len(ps) != 1 || strings.Contains(ps.Error(), "s3cr") || !strings.Contains(ps[0].Msg, "invalid URL: ") {
		t.Errorf("secret port: %v", ps)
	}
}

// quoteYAML writes s as a double-quoted YAML string.
func quoteYAML(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\x`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestEveryBound: "@every" above 100 years is refused (it overflowed the
// scheduler's phase + D: "@every 2562047h" was polled 20 times a second).
func TestEveryBound(t *testing.T) {
	for _, spec := range []string{"@every 2562047h", "@every 87601h", "CRON_TZ=UTC @every 2000000h"} {
		ps := mustFail(t, "defaults: {schedule: \""+spec+"\"}\n", nil)
		if len(ps) != 1 || ps[0].Path != "defaults.schedule" || !strings.Contains(ps[0].Msg, "at most 87600h (10 years)") {
			t.Errorf("%s: %v", spec, ps)
		}
		if _, err := ParseSchedule(spec); err == nil {
			t.Errorf("ParseSchedule(%q) accepted it", spec)
		}
	}
	ps := mustFail(t, "defaults: {schedule: \"@every 9999999h\"}\n", nil) // overflows ParseDuration
	if len(ps) != 1 || !strings.Contains(ps[0].Msg, "at most 87600h") {
		t.Errorf("overflow: %v", ps)
	}
	s, err := ParseSchedule("@every 87600h")
	if err != nil || s != (Every{D: MaxEvery}) {
		t.Fatalf("the bound itself: %v %v", s, err)
	}
	// Far from overflow at the bound: phase (< D) + D + the Unix time in
	// nanoseconds in the year 2100 leaves over a century of int64 free.
	y2100 := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	if 2*int64(MaxEvery)+y2100 > (1<<63-1)-4e18 {
		t.Errorf("MaxEvery %v: phase + D + now is near overflow", MaxEvery)
	}
	now := time.Now()
	if next := s.Next(now); !next.After(now) {
		t.Errorf("Next(%v) = %v", now, next)
	}
	// An Every built by hand past the bound still moves forward (time.Add
	// saturates rather than wrapping).
	if next := (Every{D: 1<<63 - 1}).Next(now); !next.After(now) {
		t.Errorf("Every{max}.Next(%v) = %v", now, next)
	}
}

// TestFollowRedirects: the follow_redirects key, per source and in
// defaults, sets Source.FollowRedirects (nil: not set, which means true);
// exec sources take no such key.
func TestFollowRedirects(t *testing.T) {
	cfg := mustLoad(t, `
defaults: {follow_redirects: false}
sources:
  - {name: inherit, type: http, url: "http://h/"}
  - {name: own, type: http, url: "http://h/", follow_redirects: true}
  - {name: job, type: exec, command: ["true"]}
`, nil)
	if fr := mustSource(t, cfg, "inherit").FollowRedirects; fr == nil || *fr {
		t.Errorf("inherit: %v", fr)
	}
	if fr := mustSource(t, cfg, "own").FollowRedirects; fr == nil || !*fr {
		t.Errorf("own: %v", fr)
	}
	if fr := mustSource(t, cfg, "job").FollowRedirects; fr != nil {
		t.Errorf("exec: %v", *fr)
	}
	cfg = mustLoad(t, "sources:\n  - {name: a, type: http, url: \"http://h/\"}\n", nil)
	if fr := mustSource(t, cfg, "a").FollowRedirects; fr != nil {
		t.Errorf("unset: %v", *fr)
	}
	full, err := Load("../testdata/config/full.yaml", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if fr := mustSource(t, full, "tokyo-report").FollowRedirects; fr == nil || *fr {
		t.Errorf("full.yaml tokyo-report: %v", fr)
	}
	if fr := mustSource(t, full, "status-page").FollowRedirects; fr == nil || !*fr {
		t.Errorf("full.yaml status-page inherits true: %v", fr)
	}
	for _, c := range []struct{ yaml, want string }{
		{"defaults: {follow_redirects: maybe}\n", `defaults.follow_redirects: expected true or false, got "maybe"`},
		{"sources:\n  - {name: a, type: http, url: \"http://h/\", follow_redirects: [1]}\n", "sources[name=a].follow_redirects: expected true or false, got a list"},
		{"sources:\n  - {name: j, type: exec, command: [\"true\"], follow_redirects: true}\n", "sources[name=j].follow_redirects: not allowed for type exec"},
	} {
		if ps := mustFail(t, c.yaml, nil); len(ps) != 1 || ps[0].String() != c.want {
			t.Errorf("%q: got %v, want %s", c.yaml, ps, c.want)
		}
	}
	// false changes the fingerprint; true is the default and does not.
	fp := func(v string) string {
		return mustSource(t, mustLoad(t, "sources:\n  - {name: a, type: http, url: \"http://h/\""+v+"}\n", nil), "a").Fingerprint
	}
	if fp("") != fp(", follow_redirects: true") || fp("") == fp(", follow_redirects: false") {
		t.Error("fingerprint: true must hash as unset, false apart")
	}
}
