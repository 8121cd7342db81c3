package scheduler

import (
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/internal/ratelog"
)

// localLogEvery is the shortest interval between two warnings about local
// resource errors, daemon-wide: when 10,000 sources hit EMFILE together the
// log gets one line a second with a count, not 10,000 lines.
const localLogEvery = time.Second

// localLog rate-limits the warnings about polls that failed for lack of
// pacer's own resources (policy.KindLocal). The first local error after a quiet
// second is logged at once, naming its source and error; the ones that
// follow within the second are counted, and the next line reports how many
// there were (pacer_polls_total{outcome="local_error"} has the exact
// count). The scheduler calls note with mu held.
type localLog struct {
	lim ratelog.Limiter // the last line, the local errors not logged since
}

// note records a local error of source at now and logs it unless a line was
// written within localLogEvery, through logf (table.logLocked).
func (l *localLog) note(logf func(lvl slog.Level, msg string, args ...any), now time.Time, source, err string) {
	logNow, suppressed := l.lim.Allow(now, localLogEvery, 1)
	if !logNow {
		return
	}
	logf(slog.LevelWarn, "poll failed for lack of pacer's own resources; retrying, not counted against the source",
		"source", source, "err", err, "suppressed_since_last_line", suppressed)
}
