package pgtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// userHZ is the unit of the CPU times of /proc/PID/stat (USER_HZ, 100 on
// Linux).
const userHZ = 10 * time.Millisecond

// ProcCPU reads utime+stime of pid (with children: also cutime+cstime, the
// CPU of its reaped children) and its parent's pid from /proc/PID/stat.
func ProcCPU(pid int, children bool) (cpu time.Duration, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command sits in parentheses and may hold spaces: fields start
	// after the last ")". Field 3 (state) is f[0]; ppid f[1]; utime f[11].
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, _ = strconv.Atoi(f[1])
	n := 2
	if children {
		n = 4
	}
	for _, v := range f[11 : 11+n] {
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		cpu += time.Duration(t) * userHZ
	}
	return cpu, ppid, nil
}

// ServerCPU returns a function that reads the CPU time used so far by the
// PostgreSQL server one of whose backends is backendPID (pg_backend_pid()):
// its postmaster (with its reaped children) and every live child
// (backends, writers, checkpointer, autovacuum). It fails tb when the
// server does not run on this machine.
func ServerCPU(tb testing.TB, backendPID int) func() time.Duration {
	tb.Helper()
	_, postmaster, err := ProcCPU(backendPID, false)
	if err != nil {
		tb.Fatalf("the server of PACER_TEST_POSTGRES does not run on this machine (%v): its CPU cannot be measured", err)
	}
	return func() time.Duration {
		total, _, err := ProcCPU(postmaster, true)
		if err != nil {
			tb.Fatal(err)
		}
		ents, err := os.ReadDir("/proc")
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if cpu, ppid, err := ProcCPU(pid, false); err == nil && ppid == postmaster {
				total += cpu
			}
		}
		return total
	}
}
