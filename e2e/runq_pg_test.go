//go:build faults

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// pgRunq follows how long each PostgreSQL server process (the children of
// the postmaster: the members' backends, the WAL writer, the checkpointer)
// has waited for a CPU, every 50 ms while the test runs. A member's commit
// runs in one backend and waits for the WAL writer, so on a starved machine
// it can be late by as much as the most-starved of them waited: maxBetween
// is that bound, which the cluster crash test adds to its commit window
// (as it adds the victim's own wait, runqSampler).
type pgRunq struct {
	*waitSampler
}

// samplePGRunq starts following the server of db (its postmaster found as
// the parent of this session's backend). It fails when the server is not
// on this machine, which the e2e tests' PostgreSQL always is.
func samplePGRunq(db *sql.DB) (*pgRunq, error) {
	var backend int
	if err := db.QueryRowContext(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return nil, fmt.Errorf("the backend's pid: %w", err)
	}
	pm, err := parentPID(backend)
	if err != nil {
		return nil, fmt.Errorf("the postmaster of backend %d: %w", backend, err)
	}
	return &pgRunq{waitSampler: startWaitSampler(50*time.Millisecond, func() map[int]time.Duration {
		return children(pm)
	})}, nil
}

// children is the run-queue wait of each process whose parent is
// postmaster.
func children(postmaster int) map[int]time.Duration {
	out := map[int]time.Duration{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, err := parentPID(pid); err != nil || pp != postmaster {
			continue
		}
		if w, ok := runDelay(pid); ok {
			out[pid] = w
		}
	}
	return out
}

// parentPID is pid's parent, from /proc/PID/status.
func parentPID(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no PPid in /proc/%d/status", pid)
}

// maxBetween is the longest wait for a CPU of any one server process from
// a to b (from the last sample at or before a to the first at or after b),
// 0 for a nil sampler.
func (s *pgRunq) maxBetween(a, b time.Time) time.Duration {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var from, to map[int]time.Duration
	for _, p := range s.pts {
		if !p.at.After(a) {
			from = p.wait
		}
		if !p.at.Before(b) {
			to = p.wait
			break
		}
	}
	if to == nil && len(s.pts) > 0 {
		to = s.pts[len(s.pts)-1].wait
	}
	var most time.Duration
	for pid, w := range to {
		most = max(most, w-from[pid]) // a process born after a waited all its life
	}
	return most
}
