package maintenance

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

func window(t *testing.T, spec string, d time.Duration) *config.Maintenance {
	t.Helper()
	s, err := config.ParseSchedule(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &config.Maintenance{Name: "w", ScheduleSpec: spec, Schedule: s, Duration: d, Action: config.MaintenancePause}
}

// TestActiveDaily: a daily window is in force from its start for its
// duration, not before and not at its end; it needs no memory (a process
// started inside it finds it by the same computation).
func TestActiveDaily(t *testing.T) {
	m := window(t, "0 2 * * *", 30*time.Minute)
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at   string
		want bool
	}{{"01:59:59", false}, {"02:00:00", true}, {"02:17:00", true}, {"02:29:59", true}, {"02:30:00", false}, {"14:00:00", false}} {
		at, _ := time.Parse(time.TimeOnly, c.at)
		now := day.Add(time.Duration(at.Hour())*time.Hour + time.Duration(at.Minute())*time.Minute + time.Duration(at.Second())*time.Second)
		s, u, ok := Active(m, now)
		if ok != c.want {
			t.Fatalf("at %s: active %v, want %v", c.at, ok, c.want)
		}
		if ok && (!s.Equal(day.Add(2*time.Hour)) || !u.Equal(day.Add(150*time.Minute))) {
			t.Fatalf("at %s: window [%s, %s)", c.at, s, u)
		}
	}
}

// TestActiveAcrossDST: a window in a CRON_TZ zone with daylight saving,
// minute by minute over both changes of 2026: every minute is in a window
// exactly when it lies within the duration after a start, each window
// lasts its duration in real time, and each day has exactly one window
// (spring-forward's missing 02:30 starts at the jump, 03:00 EDT;
// fall-back's repeated 01:30 starts once, at its first occurrence).
func TestActiveAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec  string
		day   time.Time
		start time.Time
	}{
		{"CRON_TZ=America/New_York 30 2 * * *", time.Date(2026, 3, 8, 0, 0, 0, 0, ny), time.Date(2026, 3, 8, 3, 0, 0, 0, ny)},
		{"CRON_TZ=America/New_York 30 1 * * *", time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 1, 1, 30, 0, 0, ny)},
	} {
		m := window(t, c.spec, 45*time.Minute)
		starts := map[time.Time]int{}
		for now := c.day; now.Before(c.day.Add(25 * time.Hour)); now = now.Add(time.Minute) {
			s, u, ok := Active(m, now)
			want := !now.Before(c.start) && now.Before(c.start.Add(45*time.Minute))
			if ok != want {
				t.Fatalf("%s at %s: active %v, want %v", c.spec, now, ok, want)
			}
			if ok {
				if u.Sub(s) != 45*time.Minute || now.Before(s) || !now.Before(u) {
					t.Fatalf("%s at %s: window [%s, %s)", c.spec, now, s, u)
				}
				starts[s]++
			}
		}
		if len(starts) != 1 {
			t.Fatalf("%s: starts %v, want one", c.spec, starts)
		}
		if w, _, _ := Active(m, c.start); !w.Equal(c.start) {
			t.Fatalf("%s: start %s, want %s", c.spec, w, c.start)
		}
	}
}

// TestReasonAndZone: the reason shows the end in the window's CRON_TZ.
func TestReasonAndZone(t *testing.T) {
	cfgText := "CRON_TZ=Europe/Berlin 0 2 * * *"
	m := window(t, cfgText, 30*time.Minute)
	m.Name = "nightly-db"
	now := time.Date(2026, 12, 7, 1, 10, 0, 0, time.UTC) // 02:10 in Berlin
	s, u, ok := Active(m, now)
	if !ok {
		t.Fatal("not active")
	}
	w := Window{Name: m.Name, Action: m.Action, Start: s, Until: u, zone: zoneOf(m.Schedule, now)}
	if got := w.Reason(now); got != "maintenance: nightly-db until 02:30" {
		t.Fatalf("reason %q", got)
	}
}

// TestResumeNoBurst: a source on "@every 1s" paused 30 s resumes once, at
// the first tick at or after the window's end.
func TestResumeNoBurst(t *testing.T) {
	s, _ := config.ParseSchedule("@every 1s")
	tm := policy.NewTiming("src", s)
	start := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	w := Window{Name: "w", Action: config.MaintenancePause, Start: start, Until: start.Add(30 * time.Second)}
	r := Resume(w, tm, &domain.SourceState{})
	if r.Before(w.Until) || r.After(w.Until.Add(time.Second)) {
		t.Fatalf("resume at %s, want within a second of %s", r, w.Until)
	}
}

// TestHoldRelease: what a silence keeps and gives at its end.
func TestHoldRelease(t *testing.T) {
	n := &config.Notify{On: []string{"error", "open", "recovered"}}
	now := time.Date(2026, 12, 7, 2, 30, 0, 0, time.UTC)
	inError := &domain.SourceState{ErrorReason: "5 consecutive failures", ConsecutiveFailures: 5}
	healthy := &domain.SourceState{LastOutcome: domain.OutcomeSuccess}
	for _, c := range []struct {
		name   string
		events []string
		st     *domain.SourceState
		want   string // "" none
	}{
		{"opened, still open", []string{"error"}, inError, "error"},
		{"opened and closed", []string{"error", "recovered"}, healthy, ""},
		{"closed one they knew", []string{"recovered"}, healthy, "recovered"},
		{"closed and opened again", []string{"recovered", "error"}, inError, ""},
		{"nothing", nil, inError, ""},
		{"opened, closed, opened", []string{"error", "recovered", "error"}, inError, "error"},
	} {
		held := ""
		for _, ev := range c.events {
			held = Hold(held, ev)
		}
		ev, ok := Release(n, "s", held, c.st, now)
		if got := map[bool]string{true: ev.Event}[ok]; got != c.want {
			t.Errorf("%s: held %q, released %q, want %q", c.name, held, got, c.want)
		}
		if ok && c.want == "error" && (ev.Reason != inError.ErrorReason || ev.State != policy.StateError || ev.ID == "") {
			t.Errorf("%s: event %+v", c.name, ev)
		}
	}
}

// TestOverlay: a source in a pause window shows paused with the window's
// reason; an operator's pause keeps its own reason; a silence window
// changes nothing shown but is returned.
func TestOverlay(t *testing.T) {
	dir := t.TempDir()
	cfg := loadCfg(t, dir, `maintenance:
  - {name: p, schedule: "0 2 * * *", duration: 30m, sources: [a], action: pause}
  - {name: s, schedule: "0 2 * * *", duration: 30m, sources: [b], action: silence}
sources:
  - {name: a, type: exec, command: ["true"], schedule: "@every 1m"}
  - {name: b, type: exec, command: ["true"], schedule: "@every 1m"}
`)
	in := time.Date(2026, 12, 7, 2, 10, 0, 0, time.UTC)
	st := &domain.SourceState{Name: "a"}
	got, w := Overlay(cfg, "a", st, in)
	if !got.Paused || got.PausedReason != "maintenance: p until 02:30" || w == nil || st.Paused || policy.StateOf(got, in) != policy.StatePaused {
		t.Fatalf("overlay %+v, window %+v", got, w)
	}
	op := &domain.SourceState{Name: "a", Paused: true, PausedReason: "by ops"}
	if got, _ := Overlay(cfg, "a", op, in); got.PausedReason != "by ops" {
		t.Fatalf("operator's pause: %+v", got)
	}
	if got, w := Overlay(cfg, "b", &domain.SourceState{Name: "b"}, in); got.Paused || w == nil || w.Action != config.MaintenanceSilence {
		t.Fatalf("silence: %+v %+v", got, w)
	}
	if got, w := Overlay(cfg, "a", st, in.Add(time.Hour)); got != st || w != nil {
		t.Fatalf("after the window: %+v %+v", got, w)
	}
	if !Silences(cfg, "a", in) || !Silences(cfg, "b", in) || Silences(cfg, "b", in.Add(time.Hour)) {
		t.Fatal("Silences")
	}
}
