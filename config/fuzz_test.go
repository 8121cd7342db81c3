package config

// Fuzz targets of the config package: Load on arbitrary YAML bytes, and the
// parsers of its scalar values (parseSize, parseRate, ParseSchedule).
//
// Their seed corpora are committed in testdata/fuzz/<FuzzName>/ (the
// "go test fuzz v1" format): plain `go test` runs every seed as a regression
// test, and `go test -run '^$' -fuzz '^FuzzLoad$' -fuzztime 30s ./config/`
// explores from them. A crasher found by the fuzzer is written there too:
// commit it with the fix.
//
// Properties checked on every input:
//   - nothing panics or hangs (a panic of the YAML parser, which Load
//     turns into a problem, fails too);
//   - a rejection is a Problems (Load) or an error naming what was invalid
//     (the parsers), and no Problem has an empty Path: each names a field
//     ("sources[name=api].url", "limits.g.rate"), an unknown key, or the
//     file itself (syntax and structure errors: "FILE" or "FILE:LINE");
//   - an accepted value is in range, and an accepted Config is fully
//     resolved (every source carries valid effective settings);
//   - no Problem shows the value of an expanded ${VAR}.

import (
	"bytes"
	"errors"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// fuzzSecret is the value of ${A} in FuzzLoad. Its URL escapes differ from
// it; fuzzSecretCore is the part that must never be shown.
const (
	fuzzSecret     = "Zk9-s3cr3t/+= x"
	fuzzSecretCore = "s3cr3t"
)

// fuzzEnv is the environment of FuzzLoad: A is a secret, E is set but
// empty, and PATH finds the usual commands.
var fuzzEnv = envMap(map[string]string{"A": fuzzSecret, "E": "", "N": "42", "D": "1s"})

// topLevelKeys are the first segments of the paths that name a field.
var topLevelKeys = []string{"store", "concurrency", "shutdown_timeout", "admin", "log", "history", "defaults", "limits", "sources", "source_files", "cluster", "notify", "hosts", "maintenance"}

// checkProblems checks a rejection of file: a non-empty Problems whose
// every Problem names where it is.
func checkProblems(t *testing.T, file string, err error, input []byte) {
	t.Helper()
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Load rejected the input with %T, not Problems: %v", err, err)
	}
	if len(ps) == 0 {
		t.Fatal("Load returned an empty Problems")
	}
	for _, p := range ps {
		if p.Path == "" {
			t.Fatalf("problem without a path: %q (all: %q)", p.String(), ps)
		}
		if p.Msg == "" {
			t.Fatalf("problem without a message: %q", p.String())
		}
		if strings.Contains(p.Msg, parserPanic) {
			t.Fatalf("the YAML parser panicked: %q", p.String())
		}
		if !namesField(file, p) {
			t.Fatalf("problem path %q names no field, key or file position (msg %q)", p.Path, p.Msg)
		}
		if !bytes.Contains(input, []byte(fuzzSecretCore)) && strings.Contains(p.String(), fuzzSecretCore) {
			t.Fatalf("problem shows the value of ${A}: %q", p.String())
		}
	}
}

// namesField reports whether p.Path says where the problem is: the file
// (optionally with a line), a path under a known top-level key, or the key
// itself for an unknown or duplicate top-level key.
func namesField(file string, p Problem) bool {
	if p.Path == file {
		return true
	}
	if rest, ok := strings.CutPrefix(p.Path, file+":"); ok {
		_, err := strconv.Atoi(rest)
		return err == nil
	}
	head := p.Path
	if i := strings.IndexAny(head, ".["); i >= 0 {
		head = head[:i]
	}
	if slices.Contains(topLevelKeys, head) {
		// The rest names keys as written (an empty key as ""), so it may
		// hold any character, dots included.
		return true
	}
	// A problem of a whole source file (source_files) is named by that
	// file, relative to the config's directory or absolute, with a line
	// for a syntax error.
	name := p.Path
	if i := strings.LastIndexByte(name, ':'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(filepath.Dir(file), name)
	}
	if _, err := os.Stat(name); err == nil && strings.Contains(p.Msg, "source file") {
		return true
	}
	// An unknown (or duplicate) top-level key is named as written; the
	// redactor may have masked a part of it.
	// ("unknown key; did you mean log?" with a suggestion).
	return strings.HasPrefix(p.Msg, "unknown key") || p.Msg == "duplicate key"
}

// checkConfig checks that an accepted Config is fully resolved and in range.
func checkConfig(t *testing.T, cfg *Config) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("accepted config out of range: "+format, args...)
	}
	if cfg.Concurrency < 1 {
		fail("concurrency %d", cfg.Concurrency)
	}
	if cfg.ShutdownTimeout <= 0 {
		fail("shutdown_timeout %v", cfg.ShutdownTimeout)
	}
	if cfg.History.Keep < 1 {
		fail("history.keep %d", cfg.History.Keep)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, cfg.Log.Level) || !slices.Contains([]string{"text", "json"}, cfg.Log.Format) {
		fail("log %+v", cfg.Log)
	}
	if strings.TrimSpace(cfg.Store) == "" || !(filepath.IsAbs(cfg.Store) || strings.HasPrefix(cfg.Store, "postgres://") || strings.HasPrefix(cfg.Store, "postgresql://")) {
		fail("store %q", cfg.Store)
	}
	if cfg.Admin.Listen != "" {
		_, port, err := net.SplitHostPort(cfg.Admin.Listen)
		if err != nil || port == "" {
			fail("admin.listen %q: %v", cfg.Admin.Listen, err)
		}
		if n, err := strconv.Atoi(port); err == nil && (n < 0 || n > 65535) {
			fail("admin.listen port %d", n)
		}
	}
	if cfg.Admin.TokenFile != "" && !filepath.IsAbs(cfg.Admin.TokenFile) {
		fail("admin.token_file %q not absolute", cfg.Admin.TokenFile)
	}
	for name, l := range cfg.Limits {
		if !validName(name) {
			fail("limit group name %q", name)
		}
		if l.Concurrency < 0 || l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.Burst < 1 || (l.Concurrency == 0 && l.Rate == 0) {
			fail("limits.%s %+v", name, l)
		}
	}
	if slices.Contains(cfg.Secrets, "") {
		fail("Secrets holds an empty string")
	}
	seen := map[string]bool{}
	for i := range cfg.Sources {
		s := cfg.Sources[i]
		if !validName(s.Name) || seen[s.Name] {
			fail("source name %q (duplicate: %v)", s.Name, seen[s.Name])
		}
		seen[s.Name] = true
		if got, ok := cfg.Source(s.Name); !ok || got != s {
			fail("Source(%q) does not find it", s.Name)
		}
		if s.Schedule == nil || strings.TrimSpace(s.ScheduleSpec) == "" {
			fail("%s: schedule %q / %v", s.Name, s.ScheduleSpec, s.Schedule)
		}
		if e, ok := s.Schedule.(Every); ok && (e.D < MinEvery || e.D > MaxEvery) {
			fail("%s: @every %v", s.Name, e.D)
		}
		if s.Timeout <= 0 {
			fail("%s: timeout %v", s.Name, s.Timeout)
		}
		b := s.Backoff
		if b.Initial <= 0 || b.Max < b.Initial || !(b.Multiplier >= 1) || math.IsInf(b.Multiplier, 0) || !(b.Jitter >= 0 && b.Jitter < 1) {
			fail("%s: backoff %+v", s.Name, b)
		}
		if s.Breaker.Failures < 0 || s.Breaker.Cooldown <= 0 || s.ErrorAfter < 0 {
			fail("%s: breaker %+v error_after %d", s.Name, s.Breaker, s.ErrorAfter)
		}
		if _, ok := cfg.Limits[s.Limit]; s.Limit != "" && !ok {
			fail("%s: limit %q undefined", s.Name, s.Limit)
		}
		if s.Fingerprint == "" || s.Fingerprint != Fingerprint(s) {
			fail("%s: fingerprint %q", s.Name, s.Fingerprint)
		}
		switch s.Type {
		case "http":
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
				fail("%s: url %q", s.Name, s.URL)
			}
			if !isToken(s.Method) || s.Method != strings.ToUpper(s.Method) {
				fail("%s: method %q", s.Name, s.Method)
			}
			if s.MaxBody <= 0 {
				fail("%s: max_body %d", s.Name, s.MaxBody)
			}
			for _, c := range s.ExpectStatus {
				if c < 100 || c > 599 {
					fail("%s: expect_status %d", s.Name, c)
				}
			}
			for k, v := range s.Headers {
				if !isToken(k) || strings.ContainsAny(v, "\r\n\x00") {
					fail("%s: header %q: %q", s.Name, k, v)
				}
				if v != "" && !slices.Contains(cfg.Secrets, v) {
					fail("%s: header %q value is not a secret", s.Name, k)
				}
			}
			if s.Command != nil || s.Env != nil || s.Dir != "" {
				fail("%s: exec fields on an http source", s.Name)
			}
		case "exec":
			if len(s.Command) == 0 || !filepath.IsAbs(s.Command[0]) || checkExecutable(s.Command[0]) != "" {
				fail("%s: command %q", s.Name, s.Command)
			}
			for _, a := range s.Command {
				if strings.ContainsRune(a, 0) {
					fail("%s: NUL in argv", s.Name)
				}
			}
			for k, v := range s.Env {
				if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
					fail("%s: env %q=%q", s.Name, k, v)
				}
			}
			if s.Dir != "" && !filepath.IsAbs(s.Dir) {
				fail("%s: dir %q", s.Name, s.Dir)
			}
			if s.URL != "" || s.Method != "" || s.MaxBody != 0 || s.Headers != nil {
				fail("%s: http fields on an exec source", s.Name)
			}
		default:
			fail("%s: type %q", s.Name, s.Type)
		}
	}
}

func FuzzLoad(f *testing.F) {
	seed, err := os.ReadFile("../testdata/config/full.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("sources: [{name: a, type: http, url: \"https://x/${A}\", schedule: \"CRON_TZ=Asia/Tokyo * * * * *\"}]"))
	f.Add([]byte("defaults: {backoff: {initial: 1s, max: 2s}}\nlimits: {g: {rate: 1.5/m}}"))
	f.Add([]byte("notify: {on: [error, open], webhook: {url: \"http://h/${A}\", headers: {K: v}}, timeout: 1s, max_age: 1h}\n" +
		"defaults: {deliver: {file: \"out/{name}.json\", when: always}}\n" +
		"sources: [{name: a, type: exec, command: [\"true\"], deliver: {command: [\"cat\"], webhook: {url: \"https://s/\"}}}, {name: b, type: exec, command: [\"true\"], deliver: null}]"))
	f.Add([]byte("defaults: {conditions: [\"status == 200\"]}\n" +
		"sources: [{name: a, type: http, url: \"https://x/\", conditions: [\"body.json.status == 'ok'\", \"tls.not_after - now > duration('336h')\", " +
		"\"duration < duration('2s')\", \"headers['x'] == 'y'\"], select: \"body.json.items.map(i, i.id)\"}, " +
		"{name: b, type: exec, command: [\"true\"], conditions: [\"exit_code == 0\", \"stdout.json.ok\", \"tls.x\"], select: \"stdout.(\"}]"))
	f.Add([]byte("maintenance: [{name: m, schedule: \"CRON_TZ=Europe/Berlin 0 2 * * *\", duration: 30m, sources: [\"a*\"], hosts: [\"H:443\"], action: pause}]\n" +
		"notify: {remind_every: 1h, webhook: {url: \"https://h/\", body: '{\"text\": {{json .Reason}}}'}}\n" +
		"sources: [{name: a, type: http, url: \"https://h/\"}]"))
	// One directory per fuzzing process (inputs run one at a time in it):
	// a t.TempDir per input would cost more than Load itself.
	path := filepath.Join(f.TempDir(), "c.yaml")
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := os.WriteFile(path, in, 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var cfg *Config
		var err error
		go func() {
			defer close(done)
			cfg, err = Load(path, fuzzEnv)
		}()
		hang := time.NewTimer(10 * time.Second)
		defer hang.Stop()
		select {
		case <-done:
		case <-hang.C:
			t.Fatalf("Load did not return within 10s on %q", in[:min(len(in), 300)])
		}
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Load = %v, %v: want exactly one of them", cfg, err)
		}
		// Options.ForStore accepts all that Load accepts, with the same
		// sources; what it rejects is reported as Load's problems are.
		fs, ferr := LoadWith(path, fuzzEnv, Options{ForStore: true})
		if (fs == nil) == (ferr == nil) {
			t.Fatalf("LoadWith(ForStore) = %v, %v: want exactly one of them", fs, ferr)
		}
		if ferr != nil {
			if err == nil {
				t.Fatalf("ForStore rejects what Load accepts: %v", ferr)
			}
			checkProblems(t, path, ferr, in)
		}
		if err != nil {
			checkProblems(t, path, err, in)
			return
		}
		checkConfig(t, cfg)
		for i := range cfg.Sources {
			if fs.Sources[i].Name != cfg.Sources[i].Name || fs.Sources[i].Fingerprint != cfg.Sources[i].Fingerprint {
				t.Fatalf("ForStore source %d: %q %q, Load: %q %q", i, fs.Sources[i].Name, fs.Sources[i].Fingerprint, cfg.Sources[i].Name, cfg.Sources[i].Fingerprint)
			}
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"10MiB", "0", "-1", "99999999999GiB", "8589934591GiB", "9223372036854775807B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			if n != 0 || err.Error() == "" {
				t.Fatalf("parseSize(%q) = %d, %q: want 0 and an error that says why", s, n, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("parseSize(%q) = %d < 0", s, n)
		}
		// The value in bytes reads back as itself.
		for _, back := range []string{strconv.FormatInt(n, 10), strconv.FormatInt(n, 10) + "B"} {
			if m, err := parseSize(back); err != nil || m != n {
				t.Fatalf("parseSize(%q) = %d, but parseSize(%q) = %d, %v", s, n, back, m, err)
			}
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10/s", "0.5/m", "1/h", "0/s", "1e3/s", "/s", ".5/h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRate(s)
		if err != nil {
			if r != 0 || err.Error() == "" {
				t.Fatalf("parseRate(%q) = %v, %q: want 0 and an error that says why", s, r, err)
			}
			return
		}
		if !(r > 0) || math.IsInf(r, 0) || math.IsNaN(r) {
			t.Fatalf("parseRate(%q) = %v: want a finite rate > 0", s, r)
		}
		// The same number per second is the same rate; per hour, 3600 times less.
		t2 := strings.TrimSpace(s)
		num := strings.TrimSpace(t2[:strings.LastIndexByte(t2, '/')])
		if r1, err := parseRate(num + "/s"); err != nil || !(r1 > 0) || r1 < r {
			t.Fatalf("parseRate(%q) = %v, but parseRate(%q) = %v, %v", s, r, num+"/s", r1, err)
		}
	})
}

func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"* * * * *", "CRON_TZ=Asia/Tokyo 0 9 * * *", "@every 1m", "TZ=", "0 0 30 2 *", "*/5 1-3,7 * * MON-FRI"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseSchedule(spec)
		if (s == nil) == (err == nil) {
			t.Fatalf("ParseSchedule(%q) = %v, %v: want exactly one of them", spec, s, err)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid schedule ") {
				t.Fatalf("ParseSchedule(%q): error %q does not say \"invalid schedule\"", spec, err)
			}
			return
		}
		now := time.Now()
		switch v := s.(type) {
		case Every:
			if v.D < MinEvery || v.D > MaxEvery {
				t.Fatalf("ParseSchedule(%q) = @every %v, outside [%v, %v]", spec, v.D, MinEvery, MaxEvery)
			}
			if got := v.Next(now); !got.Equal(now.Add(v.D)) {
				t.Fatalf("ParseSchedule(%q).Next(now) = %v, want now+%v", spec, got, v.D)
			}
		case *cron.SpecSchedule:
			if v.Location == nil {
				t.Fatalf("ParseSchedule(%q): nil location", spec)
			}
			next := v.Next(now)
			if !next.After(now) {
				t.Fatalf("ParseSchedule(%q).Next(%v) = %v: an accepted schedule fires after now", spec, now, next)
			}
			// Ticks keep coming: the one after next is later still.
			if n2 := v.Next(next); !n2.IsZero() && !n2.After(next) {
				t.Fatalf("ParseSchedule(%q): Next(%v) = %v, not after it", spec, next, n2)
			}
		default:
			if s.Next(now).IsZero() {
				t.Fatalf("ParseSchedule(%q) = %T that never fires", spec, s)
			}
		}
	})
}
