package config

import (
	"fmt"
	pathpkg "path"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
)

// Maintenance window actions (contract 15.1).
const (
	// MaintenancePause: the sources are not polled, and show as paused.
	MaintenancePause = "pause"
	// MaintenanceSilence: the sources are polled, their notifications held.
	MaintenanceSilence = "silence"
)

// Maintenance is one window of the maintenance section: it starts at each
// tick of Schedule and lasts Duration, for the sources whose name matches
// one of Sources (path.Match globs) or whose URL's host is one of Hosts.
type Maintenance struct {
	Name string
	// ScheduleSpec is the schedule as written; Schedule is the parsed cron
	// schedule (never "@every": a window needs fixed starts).
	ScheduleSpec string
	Schedule     Schedule
	Duration     time.Duration
	Sources      []string
	// Hosts are host[:port] in lower case, the default port omitted
	// (hostOf).
	Hosts  []string
	Action string
}

// Matches reports whether src is in the window: its name matches a glob
// of Sources, or it is an http source whose URL's host is in Hosts.
func (m *Maintenance) Matches(src *Source) bool {
	for _, g := range m.Sources {
		if ok, _ := pathpkg.Match(g, src.Name); ok {
			return true
		}
	}
	if len(m.Hosts) == 0 || src.Type != "http" {
		return false
	}
	h := hostOf(src.URL)
	for _, want := range m.Hosts {
		if h == want {
			return true
		}
	}
	return false
}

// MaintenanceOf returns the windows that name is in (nil for none), from
// the index Load built; the sources of no window cost nothing.
func (c *Config) MaintenanceOf(name string) []*Maintenance {
	return c.idx.maint[name]
}

// hostOf is the host group of an http source's URL (HostOf), "" when it
// has none.
func hostOf(raw string) string {
	h, _ := HostOf(raw)
	return h
}

// windowReader reads the maintenance section with the loader's readers
// (a type of its own: the loader's methods are many already).
type windowReader struct{ *loader }

// maintenance reads the maintenance section after the sources, and indexes
// the windows of each source. A glob or host that matches no source is a
// note, not a problem (a source may come later).
func (l windowReader) maintenance(n *yaml.Node, cfg *Config) {
	if n == nil || isNull(n) {
		return
	}
	items, ok := l.items(n, at("maintenance"))
	if !ok {
		return
	}
	names := map[string]bool{}
	for i, it := range items {
		m, where := l.window(it, at("maintenance").index(i))
		if m == nil {
			continue
		}
		if names[m.Name] {
			l.addf(where.key("name"), "duplicate window name %q", m.Name)
		}
		names[m.Name] = true
		cfg.Maintenance = append(cfg.Maintenance, m)
	}
	l.indexMaintenance(cfg)
}

// indexMaintenance fills cfg.idx.maint and notes the globs and hosts that
// match no source.
func (l windowReader) indexMaintenance(cfg *Config) {
	for _, m := range cfg.Maintenance {
		used := map[string]bool{}
		for _, src := range cfg.Sources {
			if !m.Matches(src) {
				continue
			}
			if cfg.idx.maint == nil {
				cfg.idx.maint = map[string][]*Maintenance{}
			}
			cfg.idx.maint[src.Name] = append(cfg.idx.maint[src.Name], m)
			for _, g := range m.Sources {
				if ok, _ := pathpkg.Match(g, src.Name); ok {
					used["s"+g] = true
				}
			}
			if src.Type == "http" {
				used["h"+hostOf(src.URL)] = true
			}
		}
		for _, g := range m.Sources {
			if !used["s"+g] {
				l.srcFiles.notes = append(l.srcFiles.notes, fmt.Sprintf("maintenance[name=%s].sources: %q matches no source", m.Name, g))
			}
		}
		for _, h := range m.Hosts {
			if !used["h"+h] {
				l.srcFiles.notes = append(l.srcFiles.notes, fmt.Sprintf("maintenance[name=%s].hosts: %q is the host of no http source", m.Name, h))
			}
		}
	}
}

// window reads one window; nil when it has no usable name.
func (l windowReader) window(n *yaml.Node, where path) (*Maintenance, path) {
	ps, ok := l.pairs(n, where)
	if !ok {
		return nil, where
	}
	m := &Maintenance{}
	for _, p := range ps {
		if p.key == "name" {
			if v, ok := l.scalar(p.val, where.key("name"), "a string"); ok && strings.TrimSpace(v) != "" {
				m.Name = strings.TrimSpace(v)
				where = at(fmt.Sprintf("maintenance[name=%s]", m.Name))
			}
		}
	}
	if m.Name == "" {
		l.addf(where.key("name"), "required")
		return nil, where
	}
	for _, p := range ps {
		l.windowKey(m, p, where.key(p.key))
	}
	l.checkWindow(m, ps, where)
	return m, where
}

// windowKey reads one key of a window into m.
func (l windowReader) windowKey(m *Maintenance, p pair, kp path) {
	switch p.key {
	case "name":
	case "schedule":
		if v, ok := l.scalar(p.val, kp, "a cron schedule"); ok {
			m.ScheduleSpec = v
			m.Schedule = l.windowSchedule(v, kp)
		}
	case "duration":
		if d, ok := l.positiveDuration(p.val, kp); ok {
			m.Duration = d
		}
	case "sources":
		m.Sources = l.windowList(p.val, kp, func(s string) (string, error) {
			_, err := pathpkg.Match(s, "")
			return s, err
		})
	case "hosts":
		m.Hosts = l.windowList(p.val, kp, hostName) // as the hosts section names hosts
	case "action":
		if v, ok := l.scalar(p.val, kp, "pause or silence"); ok {
			switch a := strings.ToLower(strings.TrimSpace(v)); a {
			case MaintenancePause, MaintenanceSilence:
				m.Action = a
			default:
				l.addf(kp, "unknown action %q: want pause or silence", v)
			}
		}
	default:
		l.addf(kp, "unknown key")
	}
}

// checkWindow reports the keys a window lacks and a duration longer than
// the gap between two of its starts (windows would overlap themselves).
func (l windowReader) checkWindow(m *Maintenance, ps []pair, where path) {
	for _, k := range []string{"schedule", "duration", "action"} {
		if !hasKey(ps, k) {
			l.addf(where.key(k), "required")
		}
	}
	if !hasKey(ps, "sources") && !hasKey(ps, "hosts") {
		l.addf(where, "needs sources (name globs), hosts, or both")
	}
	if m.Schedule == nil || m.Duration <= 0 {
		return
	}
	if gap := MinGap(m.Schedule); gap > 0 && m.Duration > gap {
		l.addf(where.key("duration"), "%s is longer than the %s between two starts of the schedule", m.Duration, gap)
	}
}

// windowSchedule parses a window's schedule: a cron schedule (CRON_TZ=
// allowed), not "@every", whose starts are not anchored to anything.
func (l windowReader) windowSchedule(v string, kp path) Schedule {
	s, err := parseSchedule(v)
	if err != nil {
		l.addf(kp, "invalid schedule: %v", err)
		return nil
	}
	if _, ok := s.(Every); ok {
		l.addf(kp, "a window needs a cron schedule (e.g. \"0 2 * * *\"), not @every")
		return nil
	}
	return s
}

// windowList reads a non-empty list of strings, each checked by check.
func (l windowReader) windowList(n *yaml.Node, kp path, check func(string) (string, error)) []string {
	items, ok := l.items(n, kp)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		l.addf(kp, "must not be empty")
	}
	var out []string
	for i, it := range items {
		v, ok := l.scalar(it, kp.index(i), "a string")
		if !ok {
			continue
		}
		c, err := check(strings.TrimSpace(v))
		if err != nil || c == "" {
			l.addf(kp.index(i), "invalid %q: %v", v, err)
			continue
		}
		out = append(out, c)
	}
	return out
}

// gapStarts bounds the starts MinGap looks at, gapSpan the time.
const (
	gapStarts = 2000
	gapSpan   = 2 * 366 * 24 * time.Hour
)

// MinGap is the shortest time between two consecutive starts of s over
// the starts of two years (at most gapStarts of them) from 2026-01-01,
// read on the wall clock of its zone (its ticks as UTC), so that a
// daylight-saving change does not count as a shorter gap; 0 when s fires
// less than twice.
func MinGap(s Schedule) time.Duration {
	if ss, ok := s.(*cron.SpecSchedule); ok {
		naive := *ss
		naive.Location = time.UTC
		s = &naive
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := s.Next(from)
	var gap time.Duration
	for i := 0; i < gapStarts && !prev.IsZero() && prev.Sub(from) < gapSpan; i++ {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = next
	}
	return gap
}
