package cli

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// madvPageout is Linux's MADV_PAGEOUT (5.4+; older kernels answer EINVAL,
// which changes nothing).
const madvPageout = 21

// trimTextRSS gives back the resident pages of the daemon's own binary
// (its code and read-only data) once the start-up is over. Recent kernels
// keep a file's page cache in large folios (up to 2 MiB, from readahead or
// the linker's writes) and map a whole folio at a fault: of the binary's
// ~25 MiB of code and read-only data, 20-25 MiB stayed resident though a
// daemon polling 2,000 sources runs a small part of it (BENCHMARKS.md,
// issue 25). MADV_PAGEOUT unmaps them and, where no other process maps
// them, drops them from the page cache (a binary being written, dirty,
// stays); MADV_RANDOM before it makes the code still in use come back a
// page at a time as it runs, not in large folios read ahead. Only read-only mappings of the binary
// without private copies are touched (their pages are the file's). Best
// effort: an error changes nothing.
func trimTextRSS() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	defer f.Close()
	var ranges [][2]uintptr
	cand := false // the mapping being read is one of the binary's read-only ones
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if k, _, _ := strings.Cut(line, " "); !strings.HasSuffix(k, ":") { // a mapping's first line
			var start, end uintptr
			start, end, cand = readOnlyMapping(line, exe)
			if cand {
				ranges = append(ranges, [2]uintptr{start, end})
			}
			continue
		}
		// A mapping with private copies of its pages (the relocated
		// read-only data, RELRO) is left alone.
		if v, ok := strings.CutPrefix(line, "Anonymous:"); ok && cand && strings.TrimSpace(strings.TrimSuffix(v, "kB")) != "0" {
			ranges, cand = ranges[:len(ranges)-1], false
		}
	}
	if sc.Err() != nil {
		return
	}
	for _, r := range ranges {
		for _, advice := range []uintptr{syscall.MADV_RANDOM, madvPageout} {
			_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, r[0], r[1]-r[0], advice)
		}
	}
}

// readOnlyMapping parses the first line of a mapping in /proc/self/smaps
// ("start-end perms offset dev inode path") and reports its range if it
// maps path and cannot be written.
func readOnlyMapping(line, path string) (start, end uintptr, ok bool) {
	f := strings.Fields(line)
	if len(f) < 6 || strings.Join(f[5:], " ") != path || len(f[1]) < 2 || f[1][1] != '-' {
		return 0, 0, false
	}
	lo, hi, found := strings.Cut(f[0], "-")
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if !found || err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
