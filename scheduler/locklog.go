package scheduler

import (
	"context"
	"log/slog"
	"sync"
)

// No log line is written under mu (a slow or blocked log handler would
// stall the loop, the workers and every reader): a line is noted under mu
// (logLocked) and written by unlock once mu is released. The lines of one
// critical section keep their order, and the sections' lines are written in
// the order the sections ended: each section with lines takes a ticket
// under mu, and unlock writes its lines only after those of the tickets
// before it (waiting, without mu, for their writers).

// lockedLog holds the log lines of the critical section under way.
type lockedLog struct {
	lines  []logLine // noted under mu
	ticket uint64    // the last ticket handed out; mu held
	// local rate-limits the warnings about local errors (locallog.go);
	// mu held.
	local localLog

	mu      sync.Mutex // guards written; taken without table.mu
	cond    sync.Cond  // signalled when written moves
	written uint64     // the tickets whose lines are written
}

// logLine is one line to write.
type logLine struct {
	lvl  slog.Level
	msg  string
	args []any
}

// logLocked notes a line, written once mu is released (unlock). mu held.
func (t *table) logLocked(lvl slog.Level, msg string, args ...any) {
	t.logs.lines = append(t.logs.lines, logLine{lvl: lvl, msg: msg, args: args})
}

// unlock releases mu, then writes the lines noted under it.
func (t *table) unlock() {
	l := &t.logs
	if len(l.lines) == 0 {
		t.mu.Unlock()
		return
	}
	lines := l.lines
	l.lines = nil
	l.ticket++
	n := l.ticket
	t.mu.Unlock()
	l.write(t.log, n, lines)
}

// write writes lines, those of ticket t, after those of the tickets before.
func (l *lockedLog) write(log *slog.Logger, t uint64, lines []logLine) {
	l.mu.Lock()
	if l.cond.L == nil {
		l.cond.L = &l.mu
	}
	for l.written != t-1 {
		l.cond.Wait()
	}
	l.mu.Unlock()
	for _, ln := range lines {
		log.Log(context.Background(), ln.lvl, ln.msg, ln.args...)
	}
	l.mu.Lock()
	l.written = t
	l.cond.Broadcast()
	l.mu.Unlock()
}
