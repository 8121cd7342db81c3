package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"

	// Time zones in CRON_TZ= prefixes must work on hosts without tzdata.
	_ "time/tzdata"
)

// MinEvery is the shortest interval accepted by "@every D".
const MinEvery = 100 * time.Millisecond

// MaxEvery is the longest interval accepted by "@every D": 10 years
// (87600h). It keeps the scheduler's arithmetic on D far from int64
// overflow: a phase in [0, D), plus D, plus the Unix time in nanoseconds
// stays below 4.8e18 until the year 2100, where int64 holds 9.2e18.
const MaxEvery = 87600 * time.Hour

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isDecimal reports whether s is a decimal number without sign or
// exponent: digits with an optional fraction ("10", "1.", "1.5") or a
// fraction alone (".5").
func isDecimal(s string) bool {
	whole, frac, dot := strings.Cut(s, ".")
	if !dot {
		return isDigits(whole)
	}
	return (whole == "" || isDigits(whole)) && (frac == "" || isDigits(frac)) && (whole != "" || frac != "")
}

// parseSize parses a size in bytes: "1024", "512B", "10KiB", "10MiB" or
// "1GiB". Negative sizes and sizes that overflow int64 are errors.
// Its errors do not repeat the input (which may hold a secret): Load
// quotes the input, redacted, itself.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num, mult := t, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	if strings.HasPrefix(num, "-") {
		return 0, errors.New("must not be negative")
	}
	if !isDigits(num) {
		return 0, errors.New("use bytes or KiB, MiB, GiB (e.g. 10MiB)")
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, errors.New("too large")
	}
	return n * mult, nil
}

// parseRate parses a rate "N/s", "N/m" or "N/h" (N > 0, decimals allowed)
// and returns it in events per second.
// Its errors do not repeat the input (which may hold a secret): Load
// quotes the input, redacted, itself.
func parseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	i := strings.LastIndexByte(t, '/')
	if i < 0 {
		return 0, errors.New("use N/s, N/m or N/h (e.g. 10/s)")
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i+1:])
	var per float64
	switch unit {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		per = 3600
	default:
		return 0, errors.New("unit must be s, m or h")
	}
	if !isDecimal(num) {
		return 0, errors.New("use N/s, N/m or N/h with a positive number N (e.g. 10/s)")
	}
	n, err := strconv.ParseFloat(num, 64)
	r := n / per
	if err != nil || !(r > 0) || math.IsInf(r, 0) {
		return 0, errors.New("must be a finite number greater than 0")
	}
	return r, nil
}

// cronOptions makes robfig/cron's parser accept five fields, six with
// leading seconds, and descriptors.
const cronOptions = cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor

// ParseSchedule parses a schedule: an optional "CRON_TZ=Area/City " (or
// "TZ=...") prefix, then five cron fields (min hour dom month dow), six with
// leading seconds, a descriptor (@hourly @daily @weekly @monthly @yearly
// @annually @midnight) or "@every D". "@every D" yields an Every value with
// MinEvery (100ms) <= D <= MaxEvery (87600h); the rest yield robfig/cron
// schedules. Cron schedules without a time zone prefix are evaluated in the
// location of the time given to Next.
// A schedule that never fires is an error.
func ParseSchedule(spec string) (Schedule, error) {
	s, err := parseSchedule(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid schedule %q: %w", spec, err)
	}
	return s, nil
}

// cronError is an error of the cron parser. Unlike the other errors of
// parseSchedule, its text may repeat parts of the input.
type cronError struct{ err error }

// Error returns the parser's message.
func (e *cronError) Error() string { return e.err.Error() }

// Unwrap returns the parser's error.
func (e *cronError) Unwrap() error { return e.err }

// parseSchedule is ParseSchedule with errors that do not repeat the input,
// except for *cronError.
func parseSchedule(spec string) (Schedule, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, errors.New("empty schedule")
	}
	var loc *time.Location
	if strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=") {
		rest := s[strings.IndexByte(s, '=')+1:]
		i := strings.IndexFunc(rest, unicode.IsSpace)
		if i < 0 {
			return nil, errors.New("time zone prefix must be followed by a space and a schedule")
		}
		name := rest[:i]
		if name == "" {
			return nil, errors.New("missing time zone name")
		}
		l, err := time.LoadLocation(name)
		if err != nil {
			return nil, errors.New("unknown time zone")
		}
		loc = l
		s = strings.TrimSpace(rest[i:])
		if s == "" {
			return nil, errors.New("missing schedule after the time zone")
		}
	}
	if rest, ok := strings.CutPrefix(s, "@every"); ok && (rest == "" || unicode.IsSpace(rune(rest[0]))) {
		ds := strings.TrimSpace(rest)
		if ds == "" {
			return nil, errors.New("@every needs a duration (e.g. @every 1m)")
		}
		d, err := time.ParseDuration(ds)
		if err != nil {
			return nil, errors.New("invalid @every duration (use e.g. 500ms, 30s, 5m; at most 87600h)")
		}
		if d < MinEvery {
			return nil, fmt.Errorf("@every duration must be at least %s", MinEvery)
		}
		if d > MaxEvery {
			return nil, errors.New("@every duration must be at most 87600h (10 years)")
		}
		return Every{D: d}, nil
	}
	sched, err := parseCron(s)
	if err != nil {
		return nil, &cronError{err: err}
	}
	if loc != nil {
		if ss, ok := sched.(*cron.SpecSchedule); ok {
			ss.Location = loc
		}
	}
	if sched.Next(time.Now()).IsZero() {
		return nil, errors.New("never fires")
	}
	return sched, nil
}

// parseCron calls the robfig parser, turning a panic into an error.
func parseCron(s string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, errors.New("cannot parse cron expression")
		}
	}()
	sched, err = cron.NewParser(cronOptions).Parse(s)
	if err == nil && sched == nil {
		err = errors.New("cannot parse cron expression")
	}
	return sched, err
}
