package policy

import (
	"time"

	"github.com/robfig/cron/v3"
)

// allHours is the Hour field of a cron schedule that fires in every hour.
const allHours = 1<<24 - 1

// atGivenHours reports whether s fires at given hours of the day (its hour
// field is not every hour): "30 2 * * *", "0 9-17 * * 1-5", "@daily". Such
// schedules name wall-clock times, which daylight-saving changes skip or
// repeat; hourly and finer ones ("0 * * * *", "*/5 * * * *") are periodic
// and run on the real clock, once an hour as the clock goes.
func atGivenHours(s *cron.SpecSchedule) bool {
	return s.Hour&allHours != allHours
}

// wallClock is a cron schedule that fires at given hours, evaluated on the
// wall clock of its time zone as cronie does across daylight-saving changes
// (robfig/cron, on real time, skips a time in the hour that spring-forward
// removes, a 47-hour gap for a daily job, and fires twice in the hour that
// fall-back repeats):
//
//   - a time that does not exist (skipped by spring-forward) fires once, at
//     the transition: "CRON_TZ=Europe/Berlin 30 2 * * *" at 03:00 CEST on
//     2026-03-29; several such times in one gap fire once;
//   - a time that exists twice (repeated by fall-back) fires once, at its
//     first occurrence: 02:30 CEST on 2026-10-25, not 02:30 CET.
//
// It walks the schedule on naive wall-clock times (the zone's fields read
// as UTC, where nothing is skipped or repeated) and maps each back to an
// instant of the zone. Outside transitions it agrees with robfig/cron.
type wallClock struct {
	zone  *time.Location // nil: the location of the time given to Next (cron's time.Local)
	naive cron.SpecSchedule
}

func newWallClock(s *cron.SpecSchedule) wallClock {
	w := wallClock{naive: *s}
	if s.Location != time.Local {
		w.zone = s.Location
	}
	w.naive.Location = time.UTC
	return w
}

// maxWalk bounds the naive times Next looks at before it falls back to
// robfig's own answer (a gap holds at most 3600 times of a schedule with
// seconds; an ordinary walk takes one or two).
const maxWalk = 10_000

// Next returns the first activation strictly after t, in t's location.
func (w wallClock) Next(t time.Time) time.Time {
	loc := w.zone
	if loc == nil {
		loc = t.Location()
	}
	if loc == time.UTC {
		return w.naive.Next(t.UTC()).In(t.Location())
	}
	lt := t.In(loc)
	n := naiveOf(lt)
	for range maxWalk {
		n = w.naive.Next(n)
		if n.IsZero() {
			return n
		}
		if at := instantOf(n, loc); at.After(t) {
			return at.In(t.Location())
		}
	}
	real := w.naive
	real.Location = loc
	return real.Next(t)
}

// naiveOf returns t's wall-clock fields as a UTC time.
func naiveOf(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}

// instantOf returns the instant at which loc's wall clock first reads the
// naive time n, or, if it never does (a spring-forward gap), the instant of
// the jump over it.
func instantOf(n time.Time, loc *time.Location) time.Time {
	y, mo, d := n.Date()
	h, mi, s := n.Clock()
	at := time.Date(y, mo, d, h, mi, s, n.Nanosecond(), loc)
	switch got := naiveOf(at); {
	case got.After(n):
		// In a gap, read with the offset before it: at lies past the jump,
		// which began at's zone.
		start, _ := at.ZoneBounds()
		return start
	case got.Before(n):
		// In a gap, read with the offset after it: the jump ends at's zone.
		_, end := at.ZoneBounds()
		return end
	}
	// n exists; if it exists twice, the first occurrence is the one read
	// with the offset in force before the zone that at lies in began.
	start, _ := at.ZoneBounds()
	if start.IsZero() {
		return at
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, off := at.Zone()
	if before > off {
		if first := at.Add(-time.Duration(before-off) * time.Second); naiveOf(first.In(loc)).Equal(n) {
			return first
		}
	}
	return at
}
