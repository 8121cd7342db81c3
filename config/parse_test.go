package config

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1024", 1024, true},
		{"512B", 512, true},
		{"10KiB", 10 << 10, true},
		{"10MiB", 10 << 20, true},
		{"1GiB", 1 << 30, true},
		{" 2 MiB ", 2 << 20, true},
		{"8589934591GiB", 8589934591 << 30, true},
		{"8589934592GiB", 0, false}, // overflows int64
		{"9223372036854775807", math.MaxInt64, true},
		{"9223372036854775808", 0, false},
		{"-1", 0, false},
		{"-1KiB", 0, false},
		{"", 0, false},
		{"KiB", 0, false},
		{"10KB", 0, false},
		{"10kib", 0, false},
		{"1.5MiB", 0, false},
		{"+5", 0, false},
		{"0x10", 0, false},
		{"10 TiB", 0, false},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if !c.ok && err == nil {
			t.Errorf("parseSize(%q) = %d, want error", c.in, got)
		}
	}
}

func TestParseRate(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"10/s", 10, true},
		{"1/s", 1, true},
		{"30/m", 0.5, true},
		{"3600/h", 1, true},
		{"1.5/s", 1.5, true},
		{"0.5/m", 0.5 / 60, true},
		{".5/s", 0.5, true},
		{" 2 / s ", 2, true},
		{"0/s", 0, false},
		{"0.0/m", 0, false},
		{"-1/s", 0, false},
		{"10", 0, false},
		{"10/d", 0, false},
		{"10/S", 0, false},
		{"/s", 0, false},
		{"abc/s", 0, false},
		{"inf/s", 0, false},
		{"NaN/s", 0, false},
		{"1e3/s", 0, false},
		{"10/s/s", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		got, err := parseRate(c.in)
		if c.ok && (err != nil || math.Abs(got-c.want) > 1e-12) {
			t.Errorf("parseRate(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if !c.ok && err == nil {
			t.Errorf("parseRate(%q) = %v, want error", c.in, got)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		spec string
		from time.Time
		want time.Time // zero: only check that it parses
	}{
		// 09:30 in Tokyo (UTC+9) is 00:30 UTC.
		{"CRON_TZ=Asia/Tokyo 30 9 * * *", base, utc("2026-01-01T00:30:00Z")},
		{"CRON_TZ=Asia/Tokyo 30 9 * * *", utc("2026-01-01T00:30:00Z"), utc("2026-01-02T00:30:00Z")},
		{"TZ=America/New_York 0 12 * * *", base, utc("2026-01-01T17:00:00Z")},
		{"*/5 * * * *", base.Add(61 * time.Second), utc("2026-01-01T00:05:00Z")},
		{"*/10 * * * * *", base.Add(5 * time.Second), utc("2026-01-01T00:00:10Z")},
		{"15 30 8 * * 1-5", base, utc("2026-01-01T08:30:15Z")}, // 2026-01-01 is a Thursday
		{"0 0 29 2 *", base, utc("2028-02-29T00:00:00Z")},
		{"@hourly", base, utc("2026-01-01T01:00:00Z")},
		{"@daily", base, utc("2026-01-02T00:00:00Z")},
		{"@midnight", base, utc("2026-01-02T00:00:00Z")},
		{"@weekly", base, utc("2026-01-04T00:00:00Z")},
		{"@monthly", base, utc("2026-02-01T00:00:00Z")},
		{"@yearly", base, utc("2027-01-01T00:00:00Z")},
		{"@annually", base, utc("2027-01-01T00:00:00Z")},
		{"CRON_TZ=UTC @daily", base, utc("2026-01-02T00:00:00Z")},
		{"  0 * * * *  ", base, utc("2026-01-01T01:00:00Z")},
	}
	for _, c := range cases {
		s, err := ParseSchedule(c.spec)
		if err != nil {
			t.Errorf("ParseSchedule(%q): %v", c.spec, err)
			continue
		}
		if _, ok := s.(*cron.SpecSchedule); !ok {
			t.Errorf("ParseSchedule(%q) = %T, want *cron.SpecSchedule", c.spec, s)
		}
		if got := s.Next(c.from); !got.Equal(c.want) {
			t.Errorf("ParseSchedule(%q).Next(%v) = %v, want %v", c.spec, c.from, got.UTC(), c.want)
		}
	}

	every := []struct {
		spec string
		want time.Duration
	}{
		{"@every 1s", time.Second},
		{"@every 100ms", 100 * time.Millisecond},
		{"@every 1h30m", 90 * time.Minute},
		{"@every   5m ", 5 * time.Minute},
		{"CRON_TZ=Asia/Tokyo @every 2m", 2 * time.Minute},
	}
	for _, c := range every {
		s, err := ParseSchedule(c.spec)
		if err != nil {
			t.Errorf("ParseSchedule(%q): %v", c.spec, err)
			continue
		}
		if s != (Every{D: c.want}) {
			t.Errorf("ParseSchedule(%q) = %#v, want Every{%v}", c.spec, s, c.want)
		}
		if got := s.Next(base); !got.Equal(base.Add(c.want)) {
			t.Errorf("Every.Next = %v", got)
		}
	}

	invalid := []struct{ spec, msg string }{
		{"", "empty"},
		{"   ", "empty"},
		{"* * * *", ""},
		{"* * * * * * *", ""},
		{"61 * * * *", ""},
		{"* * * * 8", ""},
		{"*/0 * * * *", ""},
		{"5-1 * * * *", ""},
		{"0 0 30 2 *", "never fires"},
		{"0 0 31 4 *", "never fires"},
		{"@every 50ms", "at least 100ms"},
		{"@every 0s", "at least"},
		{"@every -1m", "at least"},
		{"@every", "needs a duration"},
		{"@every abc", "invalid @every duration"},
		{"@everyday", ""},
		{"@reboot", ""},
		{"@fortnightly", ""},
		{"CRON_TZ=Nowhere/City * * * * *", "unknown time zone"},
		{"CRON_TZ=../../etc/passwd * * * * *", "unknown time zone"},
		{"CRON_TZ=Asia/Tokyo", "followed by"},
		{"TZ=", "followed by"},
		{"TZ= * * * * *", "missing time zone"},
		{"CRON_TZ=UTC   ", "followed by"},
		{"TZ=UTC TZ=UTC", ""},
		{"TZ=UTC TZ=", ""},
	}
	for _, c := range invalid {
		s, err := ParseSchedule(c.spec)
		if err == nil {
			t.Errorf("ParseSchedule(%q) = %v, want error", c.spec, s)
			continue
		}
		if s != nil {
			t.Errorf("ParseSchedule(%q) returned a schedule with an error", c.spec)
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseSchedule(%q) error %q, want it to contain %q", c.spec, err, c.msg)
		}
	}
}

// TestScannersMatchRegexps checks the hand-written scanners against the
// regular expressions they replaced, on every string of up to 5 bytes over
// an alphabet of the characters that matter.
func TestScannersMatchRegexps(t *testing.T) {
	checks := []struct {
		re *regexp.Regexp
		f  func(string) bool
	}{
		{regexp.MustCompile(`^[0-9]+$`), isDigits},
		{regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)$`), isDecimal},
		{regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`), validName},
		{regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`), isVarName},
	}
	alphabet := []string{"0", "9", "a", "z", "A", "Z", "_", ".", "-", "/", " ", "\n", "é", "\xff"}
	var all []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		all = append(all, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(prefix+c, n-1)
		}
	}
	gen("", 5)
	for _, c := range checks {
		for _, s := range all {
			if got, want := c.f(s), c.re.MatchString(s); got != want {
				t.Errorf("%s on %q: %v, want %v", c.re, s, got, want)
			}
		}
	}
	if validName(strings.Repeat("a", MaxNameLen+1)) || !validName(strings.Repeat("a", MaxNameLen)) {
		t.Error("validName: length limit")
	}
}

func TestYAMLProblemMatchesRegexp(t *testing.T) {
	re := regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	old := func(file string, err error) Problem {
		msg := err.Error()
		if m := re.FindStringSubmatch(msg); m != nil {
			return Problem{Path: file + ":" + m[1], Msg: m[2]}
		}
		return Problem{Path: file, Msg: strings.TrimPrefix(msg, "yaml: ")}
	}
	for _, msg := range []string{
		"yaml: line 3: did not find expected key", "yaml: line 12: mapping values are not allowed: here",
		"yaml: line : x", "yaml: line 3:x", "yaml: line 3 x: y", "yaml: line x3: y", "yaml: line 3: a\nb",
		"yaml: line 3: ", "yaml: line 3:", "yaml: control characters are not allowed", "yaml: line 99999999999999999999: x",
		"yaml: line ３: x", "other: line 3: x", "yaml: line 3: x: y: z", "yaml: line 3: line 4: x",
	} {
		if got, want := *yamlProblem("f.yaml", errors.New(msg)), old("f.yaml", errors.New(msg)); got != want {
			t.Errorf("%q: %+v, want %+v", msg, got, want)
		}
	}
}
