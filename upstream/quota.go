package upstream

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// unixThreshold splits X-RateLimit-Reset values: below it they are
// seconds from now, from it on a Unix time (contract 13.2).
const unixThreshold = 1_000_000_000

// QuotaUntil reports until when the answer with headers h, received at
// now, says that its host's quota is spent (contract 13.2), in any of
// three forms:
//
//   - RateLimit-Remaining: 0 with RateLimit-Reset: S (seconds; the older
//     drafts of the IETF httpapi rate-limit headers);
//   - the structured RateLimit: "name";r=0;t=S, possibly several items
//     separated by commas: spent when any item has r=0 (the latest reset
//     of the spent items wins, for until then some quota still refuses);
//   - X-RateLimit-Remaining: 0 with X-RateLimit-Reset: seconds when below
//     1,000,000,000, else a Unix time.
//
// When several forms say so, the latest time wins. It reports false when
// no form says the quota is spent, when the reset is missing, malformed or
// already due; the time is held to now + MaxWait.
func QuotaUntil(h http.Header, now time.Time) (time.Time, bool) {
	var best time.Duration
	if d, ok := remainingReset(h, "Ratelimit-Remaining", "Ratelimit-Reset", false, now); ok && d > best {
		best = d
	}
	if d, ok := structured(strings.Join(h.Values("Ratelimit"), ",")); ok && d > best {
		best = d
	}
	if d, ok := remainingReset(h, "X-Ratelimit-Remaining", "X-Ratelimit-Reset", true, now); ok && d > best {
		best = d
	}
	return capUntil(now, best)
}

// remainingReset reads a Remaining/Reset pair: spent when Remaining is 0,
// for the duration Reset says (a Unix time from unixThreshold on when
// unix is set).
func remainingReset(h http.Header, remaining, reset string, unix bool, now time.Time) (time.Duration, bool) {
	r := strings.TrimSpace(h.Get(remaining))
	if n, err := strconv.ParseFloat(r, 64); err != nil || n != 0 {
		return 0, false
	}
	v := strings.TrimSpace(h.Get(reset))
	if unix {
		f, err := strconv.ParseFloat(v, 64)
		if err == nil && f >= unixThreshold && f < 1e13 {
			sec := int64(f)
			at := time.Unix(sec, int64((f-float64(sec))*1e9))
			return at.Sub(now), true
		}
	}
	return seconds(v)
}

// structured reads the RateLimit field of the httpapi rate-limit headers
// draft: items such as `"default";r=0;t=30`, separated by commas. It
// returns the longest reset among the items whose r is 0; an item with r=0
// and no valid t says nothing usable and is skipped.
func structured(v string) (time.Duration, bool) {
	var best time.Duration
	found := false
	for _, item := range splitOutsideQuotes(v, ',') {
		r, t := "", ""
		params := splitOutsideQuotes(item, ';')
		for _, p := range params[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "r":
				r = strings.TrimSpace(val)
			case "t":
				t = strings.TrimSpace(val)
			}
		}
		if n, err := strconv.ParseInt(r, 10, 64); err != nil || n != 0 {
			continue
		}
		if d, ok := seconds(t); ok && (!found || d > best) {
			best, found = d, true
		}
	}
	return best, found
}

// splitOutsideQuotes splits s at sep, except inside a quoted string (with
// backslash escapes), as a structured field's items and parameters are.
func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// CacheUntil reports until when an answer with headers h, received at now,
// may be reused (contract 13.6, respect_cache): Cache-Control's max-age
// (less the answer's Age), else Expires (measured from the answer's Date
// when it has a valid one, so that a skewed server clock does not matter),
// held to now + MaxWait. no-store or no-cache anywhere in Cache-Control win
// and report false, as does an answer with neither header, a malformed
// max-age or Expires, or a time already due.
func CacheUntil(h http.Header, now time.Time) (time.Time, bool) {
	maxAge, hasMaxAge, ok := cacheControl(strings.Join(h.Values("Cache-Control"), ","))
	if !ok {
		return time.Time{}, false
	}
	if hasMaxAge {
		if age, ok := seconds(h.Get("Age")); ok {
			maxAge -= age
		}
		return capUntil(now, maxAge)
	}
	exp := strings.TrimSpace(h.Get("Expires"))
	if exp == "" {
		return time.Time{}, false
	}
	at, err := http.ParseTime(exp)
	if err != nil {
		return time.Time{}, false // an invalid Expires means expired already
	}
	if date, err := http.ParseTime(strings.TrimSpace(h.Get("Date"))); err == nil {
		return capUntil(now, clampSub(at, date))
	}
	return capUntil(now, clampSub(at, now))
}

// clampSub is a.Sub(b) held to ±2 MaxWait, so a far date does not saturate
// into a surprise.
func clampSub(a, b time.Time) time.Duration {
	d := a.Sub(b)
	if d > 2*MaxWait {
		return 2 * MaxWait
	}
	return d
}

// cacheControl reads Cache-Control's directives: ok is false when no-store
// or no-cache is among them or max-age is malformed; hasMaxAge says whether
// max-age was given.
func cacheControl(v string) (maxAge time.Duration, hasMaxAge, ok bool) {
	for _, d := range splitOutsideQuotes(v, ',') {
		k, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "no-store", "no-cache":
			return 0, false, false
		case "max-age":
			s, ok := seconds(strings.Trim(strings.TrimSpace(val), `"`))
			if !ok || strings.ContainsAny(val, ".eE+-") {
				return 0, false, false
			}
			if !hasMaxAge || s < maxAge {
				maxAge = s
			}
			hasMaxAge = true
		}
	}
	return maxAge, hasMaxAge, true
}
