// Package bench holds pacer's end-to-end benchmarks (load against a
// loopback server, start-up of the built binary). They live in *_test.go
// files and run only with -bench; see BENCHMARKS.md at the repository root.
// This file has the small process probes they share.
package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
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
