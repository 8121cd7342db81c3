package ratelog

import (
	"testing"
	"time"
)

// TestAllow: the first occurrence logs; those within the interval are
// held and counted; the first once the interval has passed logs with the
// count held since, which it resets; a clock stepped back logs at once.
func TestAllow(t *testing.T) {
	const every = time.Minute
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		at        time.Duration
		n         int
		logNow    bool
		held      int
		situation string
	}{
		{0, 1, true, 0, "the first"},
		{time.Second, 3, false, 3, "within the interval"},
		{59 * time.Second, 2, false, 5, "still within"},
		{every, 1, true, 5, "the interval passed: the count held"},
		{every + time.Second, 1, false, 1, "a new interval"},
		{-time.Hour, 4, true, 1, "the clock stepped back"},
		{-time.Hour + time.Second, 1, false, 1, "within the interval from there"},
	}
	var l Limiter
	for _, s := range steps {
		logNow, held := l.Allow(t0.Add(s.at), every, s.n)
		if logNow != s.logNow || held != s.held {
			t.Errorf("%s: Allow = %v, %d; want %v, %d", s.situation, logNow, held, s.logNow, s.held)
		}
	}
}
