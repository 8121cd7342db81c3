package config

import (
	"strings"
	"testing"
	"time"
)

const maintSources = `sources:
  - {name: db-1, type: http, url: "https://DB.internal:443/health", schedule: "@every 1m"}
  - {name: db-2, type: http, url: "http://db.internal:8080/h", schedule: "@every 1m"}
  - {name: api, type: exec, command: ["true"], schedule: "@every 1m"}
`

// TestMaintenanceSection: windows are read, each source is indexed to the
// windows it is in (globs on names, hosts of http URLs lower-cased with the
// default port omitted), and a glob or host that matches nothing is a note.
func TestMaintenanceSection(t *testing.T) {
	doc := `maintenance:
  - {name: nightly, schedule: "CRON_TZ=Europe/Berlin 0 2 * * *", duration: 30m, sources: ["db-*"], action: pause}
  - {name: hosts, schedule: "0 * * * *", duration: 5m, hosts: ["db.internal", "DB.internal:8080", "nowhere:1", "db.internal:443"], action: silence}
  - {name: none, schedule: "@daily", duration: 1h, sources: ["zz-*"], action: silence}
` + maintSources
	cfg, probs := loadIn(t, t.TempDir(), doc, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if len(cfg.Maintenance) != 3 || cfg.Maintenance[0].Duration != 30*time.Minute || cfg.Maintenance[1].Action != MaintenanceSilence {
		t.Fatalf("windows %+v", cfg.Maintenance)
	}
	names := func(src string) (out []string) {
		for _, m := range cfg.MaintenanceOf(src) {
			out = append(out, m.Name)
		}
		return out
	}
	if got := strings.Join(names("db-1"), ","); got != "nightly,hosts" {
		t.Errorf("db-1 in %q", got)
	}
	if got := strings.Join(names("db-2"), ","); got != "nightly,hosts" {
		t.Errorf("db-2 in %q", got)
	}
	if got := names("api"); len(got) != 0 {
		t.Errorf("api in %q", got)
	}
	notes := strings.Join(cfg.Notes, "\n")
	for _, want := range []string{`maintenance[name=none].sources: "zz-*" matches no source`, `maintenance[name=hosts].hosts: "nowhere:1" is the host of no http source`,
		`maintenance[name=hosts].hosts: "db.internal:443" is the host of no http source`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
}

// TestMaintenanceBadInput: every bad window is a problem with its path.
func TestMaintenanceBadInput(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`[{name: a, schedule: "0 2 * *", duration: 30m, sources: [x], action: pause}]`, "maintenance[name=a].schedule: invalid schedule"},
		{`[{name: a, schedule: "@every 1h", duration: 30m, sources: [x], action: pause}]`, "maintenance[name=a].schedule: a window needs a cron schedule"},
		{`[{name: a, schedule: "0 2 * * *", duration: 0s, sources: [x], action: pause}]`, "maintenance[name=a].duration: must be greater than 0"},
		{`[{name: a, schedule: "*/10 * * * *", duration: 11m, sources: [x], action: pause}]`, "maintenance[name=a].duration: 11m0s is longer than the 10m0s between two starts"},
		{`[{name: a, schedule: "0 2 * * *", duration: 30m, sources: [x], action: mute}]`, `maintenance[name=a].action: unknown action "mute"`},
		{`[{name: a, schedule: "0 2 * * *", duration: 30m, action: pause}]`, "maintenance[name=a]: needs sources"},
		{`[{name: a, schedule: "0 2 * * *", duration: 30m, sources: ["[x"], action: pause}]`, "maintenance[name=a].sources[0]: invalid"},
		{`[{name: a, schedule: "0 2 * * *", duration: 30m, hosts: ["h/x"], action: pause}]`, "maintenance[name=a].hosts[0]: invalid"},
		{`[{schedule: "0 2 * * *", duration: 30m, sources: [x], action: pause}]`, "maintenance[0].name: required"},
		{`[{name: a, duration: 30m, sources: [x]}]`, "maintenance[name=a].schedule: required"},
		{`[{name: a, schedule: "0 2 * * *", duration: 30m, sources: [x], action: pause, when: now}]`, "maintenance[name=a].when: unknown key"},
		{`[{name: a, schedule: "0 2 * * *", duration: 1m, sources: [x], action: pause}, {name: a, schedule: "0 3 * * *", duration: 1m, sources: [x], action: pause}]`, `duplicate window name "a"`},
		{`{name: a}`, "maintenance: expected a list"},
	} {
		_, probs := loadIn(t, t.TempDir(), "maintenance: "+c.doc+"\n"+maintSources, nil)
		if probs == nil || !strings.Contains(probs.Error(), c.want) {
			t.Errorf("%s: problems %v lack %q", c.doc, probs, c.want)
		}
	}
}

// TestMinGap: the gap is read on the wall clock, so a daily window of 23h30m
// in a zone with daylight saving is accepted (its real gap is 23 h once a
// year) and a window longer than a day is not.
func TestMinGap(t *testing.T) {
	for _, c := range []struct {
		spec string
		want time.Duration
	}{
		{"*/10 * * * *", 10 * time.Minute},
		{"CRON_TZ=America/New_York 30 1 * * *", 24 * time.Hour},
		{"0 2 * * 1,3", 48 * time.Hour},
		{"0 9-17 * * 1-5", time.Hour},
	} {
		s, err := ParseSchedule(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := MinGap(s); got != c.want {
			t.Errorf("MinGap(%q) = %s, want %s", c.spec, got, c.want)
		}
	}
}

// TestMaintenanceOnReload: a load that reuses the sources of the config in
// force (a SIGHUP changing one source) indexes the windows of the sources
// it reused as a first load does.
func TestMaintenanceOnReload(t *testing.T) {
	dir := t.TempDir()
	doc := "maintenance:\n  - {name: n, schedule: \"0 2 * * *\", duration: 30m, sources: [\"db-*\"], action: silence}\n" + maintSources
	prev, probs := loadIn(t, dir, doc, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	doc = strings.Replace(doc, `command: ["true"], schedule: "@every 1m"`, `command: ["true"], schedule: "@every 2m"`, 1)
	p := writeFile(t, dir, "config.yaml", doc, 0o644)
	cfg, err := LoadWith(p, envMap(nil), Options{Previous: prev})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Reused() == 0 {
		t.Fatal("the reload reused no source")
	}
	if len(cfg.MaintenanceOf("api")) != 0 || len(cfg.MaintenanceOf("db-1")) != 1 || len(cfg.MaintenanceOf("db-2")) != 1 {
		t.Fatalf("windows after the reload: api %v, db-1 %v", cfg.MaintenanceOf("api"), cfg.MaintenanceOf("db-1"))
	}
}
