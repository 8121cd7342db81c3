// Package bench holds pacer's end-to-end benchmarks (load against a
// loopback server, start-up of the built binary). They live in *_test.go
// files and run only with -bench; see BENCHMARKS.md at the repository root.
// This file has the small process probes and statistics that they, and the
// benchmarks of the scheduler and the store, share.
package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// OpenFDs returns the number of descriptors open in process pid ("self"
// for this process), or -1 if it cannot be read.
func OpenFDs(pid string) int {
	ents, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// StatusKiB returns a "kB" field of /proc/PID/status (VmHWM, VmRSS), in KiB,
// or -1.
func StatusKiB(pid, field string) int64 {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return v
		}
	}
	return -1
}

// ResetPeakRSS resets this process's VmHWM to its current RSS (Linux 4.0+),
// so that a phase's peak can be read on its own. It reports whether it could.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// EnvInt returns the positive integer in environment variable name, else
// def. The benchmarks read their rounds and sizes this way.
func EnvInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// EnvDuration returns the positive duration in environment variable name,
// else def.
func EnvDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// CPUTime returns this process's user+system CPU time, every thread
// included, or 0 if it cannot be read.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Median returns the median of xs (0 for none); xs is not modified.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Percentile returns the q-quantile (0..1) of ds by nearest rank (0 for
// none); ds is not modified.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// WriteConfig writes dir/config.yaml: n http sources named src-000000... on
// schedule (in the defaults, as a large deployment writes it) against
// url/s/N, with concurrency k and the admin API on admin ("" = off). It
// returns the file's path.
func WriteConfig(dir string, n, k int, schedule, url, admin string) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "store: pacer.db\nadmin: {listen: %q}\nconcurrency: %d\nshutdown_timeout: 10s\nlog: {level: warn}\n", admin, k)
	fmt.Fprintf(&sb, "defaults: {schedule: %q, timeout: 5s}\nsources:\n", schedule)
	for i := range n {
		fmt.Fprintf(&sb, "  - {name: src-%06d, type: http, url: \"%s/s/%d\"}\n", i, url, i)
	}
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, []byte(sb.String()), 0o600)
}
