package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
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

var (
	digitsRE  = regexp.MustCompile(`^[0-9]+$`)
	decimalRE = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)
)

// ParseSize parses a size in bytes: "1024", "512B", "10KiB", "10MiB" or
// "1GiB". Negative sizes and sizes that overflow int64 are errors.
func ParseSize(s string) (int64, error) {
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
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	}
	if !digitsRE.MatchString(num) {
		return 0, fmt.Errorf("invalid size %q: use bytes or KiB, MiB, GiB (e.g. 10MiB)", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %w", s, err)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return n * mult, nil
}

// ParseRate parses a rate "N/s", "N/m" or "N/h" (N > 0, decimals allowed)
// and returns it in events per second.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	i := strings.LastIndexByte(t, '/')
	if i < 0 {
		return 0, fmt.Errorf("invalid rate %q: use N/s, N/m or N/h (e.g. 10/s)", s)
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
		return 0, fmt.Errorf("invalid rate %q: unit must be s, m or h", s)
	}
	if !decimalRE.MatchString(num) {
		return 0, fmt.Errorf("invalid rate %q: use N/s, N/m or N/h (e.g. 10/s)", s)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid rate %q: %w", s, err)
	}
	r := n / per
	if !(r > 0) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("invalid rate %q: must be greater than 0", s)
	}
	return r, nil
}

// cronParser accepts five fields, six with leading seconds, and descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a schedule: an optional "CRON_TZ=Area/City " (or
// "TZ=...") prefix, then five cron fields (min hour dom month dow), six with
// leading seconds, a descriptor (@hourly @daily @weekly @monthly @yearly
// @annually @midnight) or "@every D". "@every D" yields an Every value with
// D >= 100ms; the rest yield robfig/cron schedules. Cron schedules without a
// time zone prefix are evaluated in the location of the time given to Next.
// A schedule that never fires is an error.
func ParseSchedule(spec string) (Schedule, error) {
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
			return nil, errors.New("missing time zone name after TZ=")
		}
		l, err := time.LoadLocation(name)
		if err != nil {
			return nil, fmt.Errorf("unknown time zone %q: %w", name, err)
		}
		loc = l
		s = strings.TrimSpace(rest[i:])
		if s == "" {
			return nil, errors.New("missing schedule after time zone")
		}
	}
	if rest, ok := strings.CutPrefix(s, "@every"); ok && (rest == "" || unicode.IsSpace(rune(rest[0]))) {
		ds := strings.TrimSpace(rest)
		if ds == "" {
			return nil, errors.New("@every needs a duration (e.g. @every 1m)")
		}
		d, err := time.ParseDuration(ds)
		if err != nil {
			return nil, fmt.Errorf("invalid @every duration: %w", err)
		}
		if d < MinEvery {
			return nil, fmt.Errorf("@every duration %s is shorter than the minimum %s", d, MinEvery)
		}
		return Every{D: d}, nil
	}
	sched, err := parseCron(s)
	if err != nil {
		return nil, fmt.Errorf("invalid schedule: %w", err)
	}
	if loc != nil {
		if ss, ok := sched.(*cron.SpecSchedule); ok {
			ss.Location = loc
		}
	}
	if sched.Next(time.Now()).IsZero() {
		return nil, errors.New("schedule never fires")
	}
	return sched, nil
}

// parseCron calls the robfig parser, turning a panic into an error.
func parseCron(s string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("cannot parse %q", s)
		}
	}()
	sched, err = cronParser.Parse(s)
	if err == nil && sched == nil {
		err = fmt.Errorf("cannot parse %q", s)
	}
	return sched, err
}
