package view

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// QueueInfo is what only the running scheduler knows of a source's wait:
// whether it has been dispatched (queued, waiting for permits or polling)
// and, when it waits in a queue, where. The zero value is "idle", which is
// all the CLI can say when it reads the store.
type QueueInfo struct {
	// Busy: dispatched and not finished (a job of the source exists).
	Busy bool
	// Queue is where a busy source waits: "" (not in a queue: it holds its
	// permits and polls), QueueGlobal, or the name of its limits group.
	Queue string
	// Ahead is the number of jobs ahead of it in Queue.
	Ahead int
	// Blocked is why it was not polled at its last due time (its host or
	// a dependency, contract section 13), or "".
	Blocked string
}

// QueueGlobal names the global queue (waiting for one of the `concurrency`
// permits) in QueueInfo.Queue.
const QueueGlobal = "*"

// Explain says in words why a source is not polling at now, or what it is
// doing (contract section 11.2): one pure function of the source's
// configuration, its state, now and its place in the scheduler's queues.
// Times are shown in UTC; redact masks secrets in the texts it quotes (nil:
// none).
func Explain(src *config.Source, st *domain.SourceState, now time.Time, q QueueInfo, redact func(string) string) string {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	switch {
	case q.Busy && q.Queue == "":
		return "polling now"
	case q.Busy:
		return waitingText(q)
	case st.Paused:
		return "paused: " + redact(st.PausedReason)
	case st.ErrorReason != "" && src.ErrorReprobe > 0 && st.NextRunAt != nil:
		return "error: " + redact(st.ErrorReason) + "; re-probe " + reprobeWhen(*st.NextRunAt, now)
	case st.ErrorReason != "":
		return "error: " + redact(st.ErrorReason) + "; reset to resume"
	}
	next := "due now"
	if st.NextRunAt != nil && st.NextRunAt.After(now) {
		next = "in " + Relative(st.NextRunAt.Sub(now))
	}
	if q.Blocked != "" {
		return "blocked: " + q.Blocked + "; looked at again " + next
	}
	if st.LastOutcome == domain.OutcomeThrottled {
		return "throttled: next attempt " + next
	}
	switch policy.BreakerOf(st, now) {
	case breaker.Open:
		return fmt.Sprintf("breaker open until %s (cooldown %s)", clockTime(*st.BreakerUntil, now), ShortDuration(src.Breaker.Cooldown))
	case breaker.HalfOpen:
		return "breaker half-open: the next poll is its probe, " + next
	}
	if n := st.ConsecutiveFailures; n > 0 {
		of := ""
		if src.ErrorAfter > 0 {
			of = fmt.Sprintf(" of %d", src.ErrorAfter)
		}
		if next == "due now" {
			return fmt.Sprintf("backoff: failure %d%s, next attempt due now", n, of)
		}
		return fmt.Sprintf("backoff: failure %d%s, next attempt %s", n, of, next)
	}
	if st.NextRunAt == nil && st.LastRunAt == nil {
		// Never loaded by a daemon (the CLI reading a store without one).
		return "first poll at its first schedule tick"
	}
	if next == "due now" {
		return "due now"
	}
	if st.LastRunAt == nil {
		return "first poll " + next
	}
	if cacheDeferred(src, st) {
		return "next poll " + next + ", deferred by the last answer's Cache-Control or Expires (respect_cache)"
	}
	return "next poll " + next
}

// cacheDeferred reports whether st's next run is later than src's
// schedule would put it after its last successful poll: what
// respect_cache does (contract 13.6).
func cacheDeferred(src *config.Source, st *domain.SourceState) bool {
	if !src.RespectCache || src.Schedule == nil || st.LastOutcome != domain.OutcomeSuccess || st.NextRunAt == nil {
		return false
	}
	return st.NextRunAt.After(src.Schedule.Next(*st.LastRunAt).Add(time.Second))
}

// waitingText explains a source waiting in a queue for its permits.
func waitingText(q QueueInfo) string {
	s := "waiting for a permit"
	if q.Queue != QueueGlobal {
		s += " of group " + q.Queue
	}
	if q.Ahead > 0 {
		s += fmt.Sprintf(" (%d ahead)", q.Ahead)
	}
	return s
}

// Relative renders a positive duration for people: "42 s", "3 min",
// "2 h 5 min", "3 d". Anything under a second is "1 s" (it is not due yet).
func Relative(d time.Duration) string {
	secs := int64(math.Ceil(d.Seconds()))
	switch {
	case secs < 1:
		return "1 s"
	case secs < 90:
		return fmt.Sprintf("%d s", secs)
	case secs < 90*60:
		return fmt.Sprintf("%d min", (secs+30)/60)
	case secs < 48*3600:
		h, m := secs/3600, secs%3600/60
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
	return fmt.Sprintf("%d d", secs/86400)
}

// clockTime shows t (UTC) as 15:04:05, with the date when it is not today's.
func clockTime(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.Format(time.DateOnly) != now.Format(time.DateOnly) {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format(time.TimeOnly)
}

// ShortDuration is d.String() without its zero tails, as a config writes
// it: "1m", "1h30m", "20s", "250ms". The dashboard shows settings with it.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// reprobeWhen says when a source in error is probed again (contract
// 10.4): "in 42s", or "due now" once that time has passed.
func reprobeWhen(at, now time.Time) string {
	if at.After(now) {
		return "in " + Relative(at.Sub(now))
	}
	return "due now"
}
