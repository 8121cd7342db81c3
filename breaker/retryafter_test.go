package breaker

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	// A clock with a sub-second part, as a real time.Now has.
	nowNs := now.Add(123456789 * time.Nanosecond)
	date := func(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
	capped := now.Add(MaxRetryAfter)

	tests := []struct {
		name   string
		v      string
		now    time.Time
		want   time.Time
		wantOK bool
	}{
		{"seconds", "120", now, now.Add(120 * time.Second), true},
		{"zero", "0", now, now, true},
		{"padded", " 5 ", now, now.Add(5 * time.Second), true},
		{"tab and newline", "\t7\r\n", now, now.Add(7 * time.Second), true},
		{"leading zeros", "007", now, now.Add(7 * time.Second), true},
		{"seconds keep sub-second now", "3", nowNs, nowNs.Add(3 * time.Second), true},
		{"exactly the cap", "86400", now, capped, true},
		{"one over the cap", "86401", now, capped, true},
		{"a year", "31536000", now, capped, true},
		{"max uint64", "18446744073709551615", now, capped, true},
		{"huge number", "99999999999999999999", now, capped, true},
		{"enormous number", "99999999999999999999999999999999999999999999", now, capped, true},

		{"negative", "-1", now, time.Time{}, false},
		{"plus sign", "+5", now, time.Time{}, false},
		{"letters", "abc", now, time.Time{}, false},
		{"empty", "", now, time.Time{}, false},
		{"blank", "   ", now, time.Time{}, false},
		{"fraction", "1.5", now, time.Time{}, false},
		{"digits then junk", "5s", now, time.Time{}, false},
		{"two numbers", "5 6", now, time.Time{}, false},
		{"underscore", "1_000", now, time.Time{}, false},
		{"hex", "0x10", now, time.Time{}, false},
		{"huge number then junk", "99999999999999999999x", now, time.Time{}, false},
		{"huge number then fraction", "99999999999999999999.5", now, time.Time{}, false},
		{"malformed date", "Mon, 32 Nov 2026 10:00:00 GMT", now, time.Time{}, false},
		{"RFC 3339 is not an HTTP-date", "2026-11-30T10:05:00Z", now, time.Time{}, false},

		{"date in the future", date(now.Add(90 * time.Second)), now, now.Add(90 * time.Second), true},
		{"date in the future, GMT+local clock", date(now.Add(time.Hour)), now.In(time.FixedZone("X", 5*3600)), now.Add(time.Hour), true},
		{"date padded", "  " + date(now.Add(time.Minute)) + " ", now, now.Add(time.Minute), true},
		{"date now", date(now), now, now, true},
		{"date in the past", date(now.Add(-time.Hour)), now, now, true},
		{"date long ago", "Sun, 06 Nov 1994 08:49:37 GMT", now, now, true},
		{"date in the past, sub-second now", date(nowNs.Add(-time.Second)), nowNs, nowNs, true},
		{"date at the cap", date(now.Add(MaxRetryAfter)), now, capped, true},
		{"date just past the cap", date(now.Add(MaxRetryAfter + time.Second)), now, capped, true},
		{"date far in the future", "Fri, 31 Dec 9999 23:59:59 GMT", now, capped, true},
		{"RFC 850 date", now.Add(2 * time.Minute).Format("Monday, 02-Jan-06 15:04:05 GMT"), now, now.Add(2 * time.Minute), true},
		{"ANSI C date", now.Add(3 * time.Minute).Format(time.ANSIC), now, now.Add(3 * time.Minute), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tc.v, tc.now)
			if ok != tc.wantOK {
				t.Fatalf("ParseRetryAfter(%q) ok = %v, want %v (got %v)", tc.v, ok, tc.wantOK, got)
			}
			if !got.Equal(tc.want) {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %v", tc.v, got, tc.want)
			}
			if ok && (got.Before(tc.now) || got.After(tc.now.Add(MaxRetryAfter))) {
				t.Fatalf("ParseRetryAfter(%q) = %v, outside [now, now+MaxRetryAfter]", tc.v, got)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, s := range []string{
		"", " ", "0", "120", " 5 ", "-1", "+5", "abc", "1.5", "5s", "007",
		"86400", "86401", "18446744073709551615", "18446744073709551616",
		"99999999999999999999", "99999999999999999999x",
		base.Add(time.Hour).Format(http.TimeFormat),
		base.Add(-time.Hour).Format(http.TimeFormat),
		"Fri, 31 Dec 9999 23:59:59 GMT",
		"Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT",
		"Sun Nov  6 08:49:37 1994",
		"Mon, 01 Jan 0001 00:00:00 GMT",
	} {
		f.Add(s, int64(0))
	}
	f.Add("120", int64(123456789))
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", int64(-1))
	f.Fuzz(func(t *testing.T, v string, offsetNs int64) {
		now := base.Add(time.Duration(offsetNs))
		got, ok := ParseRetryAfter(v, now)
		if !ok {
			if !got.IsZero() {
				t.Fatalf("ParseRetryAfter(%q) = %v, false: want the zero time", v, got)
			}
			return
		}
		if got.Before(now) || got.After(now.Add(MaxRetryAfter)) {
			t.Fatalf("ParseRetryAfter(%q, %v) = %v, outside [now, now+%v]", v, now, got, MaxRetryAfter)
		}
	})
}
