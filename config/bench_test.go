package config

// Benchmarks of Load on a config with 100,000 sources and of Fingerprint.
//
//	go test ./config -run '^$' -bench 'BenchmarkLoad|BenchmarkFingerprint' -count 3
//
// Each figure is reported with a baseline measured in the same iteration
// (the rounds alternate), so that a noisy machine moves both alike:
//   - BenchmarkLoad: yaml.v3 decoding the same bytes into a yaml.Node, the
//     part of Load that cannot be avoided. "load/yaml" is their ratio.
//   - BenchmarkFingerprint: json.Marshal + SHA-256 (oldFingerprint below,
//     the first implementation; Fingerprint streams the same document
//     through a reused json.Encoder). "new/old" is their ratio.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// benchSources is the number of sources of BenchmarkLoad.
const benchSources = 100_000

// benchConfig returns a config with n sources: mostly http sources on
// "@every 1m", every 10th with headers (one from ${TOKEN}), every 25th with
// expect_status and max_body, every 50th a cron schedule and a limit group,
// and every 100th an exec source (every other one found in PATH).
func benchConfig(n int) []byte {
	var b strings.Builder
	b.Grow(n * 110)
	b.WriteString("store: pacer.db\nconcurrency: 64\nlog: {level: warn}\n")
	b.WriteString("defaults:\n  timeout: 5s\n  backoff: {initial: 1s, max: 10m}\n")
	b.WriteString("limits:\n  partner-api: {concurrency: 4, rate: 10/s}\n")
	b.WriteString("sources:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: src-%06d\n", i)
		switch {
		case i%100 == 99:
			b.WriteString("    type: exec\n")
			if i%200 == 99 {
				b.WriteString("    command: [\"true\"]\n")
			} else {
				fmt.Fprintf(&b, "    command: [\"/bin/sh\", \"-c\", \"exit 0\", \"%d\"]\n    env: {MODE: quick}\n", i)
			}
			b.WriteString("    schedule: \"@every 5m\"\n")
			continue
		}
		b.WriteString("    type: http\n")
		fmt.Fprintf(&b, "    url: https://api-%d.example.com/v1/status/%d\n", i%97, i)
		if i%50 == 7 {
			b.WriteString("    schedule: \"*/5 * * * *\"\n    limit: partner-api\n")
		} else {
			b.WriteString("    schedule: \"@every 1m\"\n")
		}
		if i%10 == 3 {
			b.WriteString("    headers: {Accept: application/json, Authorization: \"Bearer ${TOKEN}\"}\n")
		}
		if i%25 == 11 {
			b.WriteString("    expect_status: [200, 204]\n    max_body: 1MiB\n")
		}
	}
	return []byte(b.String())
}

func BenchmarkLoad(b *testing.B) {
	data := benchConfig(benchSources)
	path := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	env := envMap(map[string]string{"TOKEN": "t0k3n-s3cr3t"})
	var loadT, yamlT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		var n yaml.Node
		if err := yaml.Unmarshal(data, &n); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		cfg, err := Load(path, env)
		t2 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if len(cfg.Sources) != benchSources {
			b.Fatalf("got %d sources", len(cfg.Sources))
		}
		yamlT += t1.Sub(t0)
		loadT += t2.Sub(t1)
	}
	b.ReportMetric(float64(loadT)/1e6/float64(b.N), "ms/load")
	b.ReportMetric(float64(yamlT)/1e6/float64(b.N), "ms/yaml")
	b.ReportMetric(float64(loadT)/float64(yamlT), "load/yaml")
}

func BenchmarkFingerprint(b *testing.B) {
	cfg, err := Load(writeBench(b, benchConfig(1000)), envMap(map[string]string{"TOKEN": "t0k3n-s3cr3t"}))
	if err != nil {
		b.Fatal(err)
	}
	srcs := cfg.Sources
	var newT, oldT time.Duration
	var sink int
	var fp fingerprinter // reused, as Load does
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		for j := range srcs {
			sink += len(fp.fingerprint(srcs[j]))
		}
		t1 := time.Now()
		for j := range srcs {
			sink += len(oldFingerprint(srcs[j]))
		}
		t2 := time.Now()
		newT += t1.Sub(t0)
		oldT += t2.Sub(t1)
	}
	if sink == 0 {
		b.Fatal("no fingerprints")
	}
	per := float64(b.N * len(srcs))
	b.ReportMetric(float64(newT)/per, "ns/fp")
	b.ReportMetric(float64(oldT)/per, "ns/old-fp")
	b.ReportMetric(float64(newT)/float64(oldT), "new/old")
}

func writeBench(b *testing.B, data []byte) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// oldCanonicalSource and oldFingerprint are the first implementation of
// Fingerprint (version 1), written separately from fpDoc: the baseline of
// BenchmarkFingerprint and the reference that TestFingerprintMatchesJSON
// compares Fingerprint with.
type oldCanonicalSource struct {
	V            int               `json:"v"`
	Name         string            `json:"name"`
	Type         string            `json:"type"`
	ScheduleSpec string            `json:"schedule"`
	Timeout      int64             `json:"timeout"`
	Initial      int64             `json:"backoff_initial"`
	Max          int64             `json:"backoff_max"`
	Multiplier   float64           `json:"backoff_multiplier"`
	Jitter       float64           `json:"backoff_jitter"`
	Failures     int               `json:"breaker_failures"`
	Cooldown     int64             `json:"breaker_cooldown"`
	ErrorAfter   int               `json:"error_after"`
	Limit        string            `json:"limit"`
	URL          string            `json:"url"`
	Method       string            `json:"method"`
	Headers      map[string]string `json:"headers"`
	Body         string            `json:"body"`
	ExpectStatus []int             `json:"expect_status"`
	MaxBody      int64             `json:"max_body"`
	Command      []string          `json:"command"`
	Env          map[string]string `json:"env"`
	Dir          string            `json:"dir"`
}

func oldFingerprint(s *Source) string {
	c := oldCanonicalSource{
		V:            1,
		Name:         s.Name,
		Type:         s.Type,
		ScheduleSpec: s.ScheduleSpec,
		Timeout:      int64(s.Timeout),
		Initial:      int64(s.Backoff.Initial),
		Max:          int64(s.Backoff.Max),
		Multiplier:   s.Backoff.Multiplier,
		Jitter:       s.Backoff.Jitter,
		Failures:     s.Breaker.Failures,
		Cooldown:     int64(s.Breaker.Cooldown),
		ErrorAfter:   s.ErrorAfter,
		Limit:        s.Limit,
		URL:          s.URL,
		Method:       s.Method,
		Headers:      s.Headers,
		Body:         s.Body,
		ExpectStatus: s.ExpectStatus,
		MaxBody:      s.MaxBody,
		Command:      s.Command,
		Env:          s.Env,
		Dir:          s.Dir,
	}
	if len(c.Headers) == 0 {
		c.Headers = nil
	}
	if len(c.Env) == 0 {
		c.Env = nil
	}
	if len(c.ExpectStatus) == 0 {
		c.ExpectStatus = nil
	}
	if len(c.Command) == 0 {
		c.Command = nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		data = []byte(err.Error())
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// benchSourceFiles is the number of files BenchmarkLoadSourceFiles spreads
// benchSources over.
const benchSourceFiles = 1000

// splitBenchConfig writes benchConfig(n) to dir twice: as one file
// (one.yaml) and as a config with the same top level whose sources are
// spread over files consecutive sources at a time (files.yaml and
// sources.d/NNNN.yaml). It returns both configs' paths.
func splitBenchConfig(tb testing.TB, dir string, n, files int) (one, split string) {
	tb.Helper()
	data := string(benchConfig(n))
	head, list, ok := strings.Cut(data, "sources:\n")
	if !ok {
		tb.Fatal("benchConfig has no sources list")
	}
	items := strings.SplitAfter(list, "\n  - name: ")
	// items[0] is "  - name: X...\n  - name: ", each next one "Y...\n  - name: ".
	srcs := make([]string, 0, n)
	for i, it := range items {
		it = strings.TrimSuffix(it, "  - name: ")
		if i == 0 {
			it = strings.TrimPrefix(it, "  - name: ")
		}
		srcs = append(srcs, "  - name: "+it)
	}
	if len(srcs) != n {
		tb.Fatalf("split %d sources, want %d", len(srcs), n)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	per := (n + files - 1) / files
	for f := 0; f*per < n; f++ {
		write(fmt.Sprintf("sources.d/%04d.yaml", f), "sources:\n"+strings.Join(srcs[f*per:min(n, (f+1)*per)], ""))
	}
	return write("one.yaml", data), write("files.yaml", head+"source_files: [\"sources.d/*.yaml\"]\n")
}

// BenchmarkLoadSourceFiles: Load of 100,000 sources spread over 1,000
// source files against the same sources in one file, alternating in each
// iteration. "files/one" is their ratio. A SIGHUP reload is this Load and
// scheduler.Reload, which is the same for both.
//
//	go test ./config -run '^$' -bench 'BenchmarkLoadSourceFiles' -count 3
func BenchmarkLoadSourceFiles(b *testing.B) {
	one, split := splitBenchConfig(b, b.TempDir(), benchSources, benchSourceFiles)
	env := envMap(map[string]string{"TOKEN": "t0k3n-s3cr3t"})
	var oneT, filesT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c1, err := Load(one, env)
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		c2, err := Load(split, env)
		t2 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if len(c1.Sources) != benchSources || len(c2.Sources) != benchSources || len(c2.SourceFiles) != benchSourceFiles {
			b.Fatalf("got %d and %d sources (%d files)", len(c1.Sources), len(c2.Sources), len(c2.SourceFiles))
		}
		oneT += t1.Sub(t0)
		filesT += t2.Sub(t1)
	}
	b.ReportMetric(float64(oneT)/1e6/float64(b.N), "ms/one-file")
	b.ReportMetric(float64(filesT)/1e6/float64(b.N), "ms/1000-files")
	b.ReportMetric(float64(filesT)/float64(oneT), "files/one")
}

// BenchmarkLoadReuse is the config's part of a SIGHUP with one of 100,000
// sources changed: LoadWith with the config in force as Options.Previous
// (issue 15 target 4: the whole reload <= 100 ms of CPU). "reused" is the
// number of sources taken from the previous config.
//
//	go test ./config -run '^$' -bench BenchmarkLoadReuse -benchtime 10x -count 3
func BenchmarkLoadReuse(b *testing.B) {
	data := benchConfig(benchSources)
	path := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	env := envMap(map[string]string{"TOKEN": "t0k3n-s3cr3t"})
	prev, err := Load(path, env)
	if err != nil {
		b.Fatal(err)
	}
	changed := []byte(strings.Replace(string(data), "/v1/status/12345\n", "/v1/status/12345x\n", 1))
	if string(changed) == string(data) {
		b.Fatal("no source 12345 to change")
	}
	texts := [][]byte{changed, data}
	reused := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := os.WriteFile(path, texts[i%2], 0o600); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cfg, err := LoadWith(path, env, Options{Previous: prev})
		if err != nil {
			b.Fatal(err)
		}
		reused, prev = cfg.Reused(), cfg
	}
	b.ReportMetric(float64(reused), "reused")
}
