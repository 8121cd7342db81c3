package breaker

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps a Retry-After so that a hostile or broken upstream
// cannot park a source for years.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter parses an HTTP Retry-After value (delay-seconds or an
// HTTP-date) received at now and returns the time before which the next
// request must not be made. ok is false for an empty or malformed value. A
// date in the past yields now; anything beyond MaxRetryAfter is capped.
func ParseRetryAfter(v string, now time.Time) (t time.Time, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		// delay-seconds is 1*DIGIT. Check every byte first: ParseUint
		// reports an overflow before it looks at the rest, so
		// "99999999999999999999x" would pass as a valid (huge) delay.
		for i := 0; i < len(v); i++ {
			if v[i] < '0' || v[i] > '9' {
				return time.Time{}, false
			}
		}
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			// Only a value out of range is left: cap it.
			return now.Add(MaxRetryAfter), true
		}
		if secs > uint64(MaxRetryAfter/time.Second) {
			return now.Add(MaxRetryAfter), true
		}
		return now.Add(time.Duration(secs) * time.Second), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return time.Time{}, false
	}
	switch {
	case at.Before(now):
		return now, true
	case at.Sub(now) > MaxRetryAfter:
		return now.Add(MaxRetryAfter), true
	}
	return at, true
}
