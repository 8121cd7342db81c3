// Package ratelog rate-limits a log line that reports how many were held
// back: the first occurrence after a quiet interval is logged at once, the
// ones that follow within the interval are only counted, and the next line
// says how many there were ("suppressed since the last line"). The caller
// passes the time, read on its own clock, as x/time/rate's AllowN does.
package ratelog

import "time"

// Limiter is one rate-limited log line: when it was last written and how
// many occurrences were held back since. The zero Limiter logs its first
// occurrence. It is not safe for concurrent use: it lives in its owner's
// state, under the owner's lock or in one goroutine.
type Limiter struct {
	last       time.Time // when the last line was written
	suppressed int       // occurrences since then, not logged
}

// Allow counts n occurrences at now and reports whether to write the line
// now: the first time, once every has passed since the last line, or when
// now is before it (the clock stepped back: the interval is not known, so
// the line is not held back). held is the number of occurrences not logged
// since the last line (without these n); a line resets it.
func (l *Limiter) Allow(now time.Time, every time.Duration, n int) (logNow bool, held int) {
	if !l.last.IsZero() && now.Sub(l.last) < every && !now.Before(l.last) {
		l.suppressed += n
		return false, l.suppressed
	}
	held = l.suppressed
	l.last, l.suppressed = now, 0
	return true, held
}
