//go:build unix

package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuNow returns the CPU time (user and system) of the process so far.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoad100k measures what the cut sources list (loadFast: the list
// cut from the raw text, parsed by yaml.v3 in batches, unchanged items
// reused from Options.Previous) buys against yaml.v3's node tree of the
// whole file (loadTree) at 100,000 sources, alternating in each iteration,
// in wall and CPU time: start-up (a Load without a previous config) and
// reload (one source changed, the config in force as Options.Previous).
// The cut list is kept for its reload figure (issue 21: at least 2x).
//
//	go test -run '^$' -bench Load100k -benchtime 1x -count 6 ./config/
func BenchmarkLoad100k(b *testing.B) {
	data := benchConfig(benchSources)
	dir := b.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	changed := []byte(strings.Replace(string(data), "/v1/status/12345\n", "/v1/status/12345x\n", 1))
	path2 := filepath.Join(dir, "changed.yaml")
	if err := os.WriteFile(path2, changed, 0o600); err != nil {
		b.Fatal(err)
	}
	env := envMap(map[string]string{"TOKEN": "t0k3n-s3cr3t"})
	prev, err := Load(path2, env)
	if err != nil {
		b.Fatal(err)
	}
	prevData := strings.Replace(string(changed), "/v1/status/12345x\n", "/v1/status/12345\n", 1)
	if err := os.WriteFile(path2, []byte(prevData), 0o600); err != nil {
		b.Fatal(err)
	}
	tree := func(p string) func() (*Config, error) {
		return func() (*Config, error) {
			abs, _ := filepath.Abs(p)
			d, err := readConfigFile(abs)
			if err != nil {
				return nil, err
			}
			return loadTree(p, abs, d, env, Options{})
		}
	}
	names := []string{"start-cut", "start-tree", "reload-cut", "reload-tree"}
	runs := []func() (*Config, error){
		func() (*Config, error) { return Load(path, env) },
		tree(path),
		func() (*Config, error) { return LoadWith(path2, env, Options{Previous: prev}) },
		tree(path2),
	}
	wall := make([]time.Duration, len(runs))
	cpu := make([]time.Duration, len(runs))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, run := range runs {
			runtime.GC() // the garbage of the run before is not this one's
			w0, c0 := time.Now(), cpuNow()
			cfg, err := run()
			wall[k] += time.Since(w0)
			cpu[k] += cpuNow() - c0
			if err != nil || len(cfg.Sources) != benchSources {
				b.Fatalf("%s: %v", names[k], err)
			}
		}
	}
	for k, n := range names {
		b.ReportMetric(float64(wall[k])/1e6/float64(b.N), n+"-ms")
		b.ReportMetric(float64(cpu[k])/1e6/float64(b.N), n+"-cpu-ms")
	}
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "start-tree/cut-cpu")
	b.ReportMetric(float64(cpu[3])/float64(cpu[2]), "reload-tree/cut-cpu")
}
