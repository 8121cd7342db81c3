package policy

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// inUTC is a fixed instant in UTC, to the minute.
func inUTC(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

// Cron schedules across daylight-saving changes, with fixed instants
// (Europe/Berlin 2026: 2026-03-29 02:00 CET -> 03:00 CEST at 01:00 UTC,
// 2026-10-25 03:00 CEST -> 02:00 CET at 01:00 UTC; America/New_York 2026:
// 2026-03-08 02:00 EST -> 03:00 EDT at 07:00 UTC, 2026-11-01 02:00 EDT ->
// 01:00 EST at 06:00 UTC). A time of a daily job in the skipped hour fires
// once, at the jump; one in the repeated hour fires once, at its first
// occurrence (cronie); hourly jobs fire once an hour of real time; zones
// without DST, and @every, are unchanged.
func TestScheduleAcrossDST(t *testing.T) {
	tests := []struct {
		name, spec string
		from       time.Time
		want       []time.Time // the next activations, in order
	}{
		{"berlin spring: 02:30 runs at the jump (03:00 CEST), then 02:30 CEST", "CRON_TZ=Europe/Berlin 30 2 * * *",
			inUTC(2026, 3, 28, 1, 30), []time.Time{inUTC(2026, 3, 29, 1, 0), inUTC(2026, 3, 30, 0, 30)}},
		{"berlin spring: two times in the gap run once", "CRON_TZ=Europe/Berlin 0,30 2 * * *",
			inUTC(2026, 3, 28, 1, 30), []time.Time{inUTC(2026, 3, 29, 1, 0), inUTC(2026, 3, 30, 0, 0), inUTC(2026, 3, 30, 0, 30)}},
		{"berlin spring: from inside the jump's minute", "CRON_TZ=Europe/Berlin 30 2 * * *",
			inUTC(2026, 3, 29, 0, 59), []time.Time{inUTC(2026, 3, 29, 1, 0), inUTC(2026, 3, 30, 0, 30)}},
		{"berlin fall: 02:30 runs once, at 02:30 CEST", "CRON_TZ=Europe/Berlin 30 2 * * *",
			inUTC(2026, 10, 24, 0, 30), []time.Time{inUTC(2026, 10, 25, 0, 30), inUTC(2026, 10, 26, 1, 30)}},
		{"berlin fall: from the repeated hour's second pass", "CRON_TZ=Europe/Berlin 30 2 * * *",
			inUTC(2026, 10, 25, 1, 10), []time.Time{inUTC(2026, 10, 26, 1, 30)}},
		{"berlin fall: 03:15 after the repeated hour", "CRON_TZ=Europe/Berlin 15 3 * * *",
			inUTC(2026, 10, 25, 0, 50), []time.Time{inUTC(2026, 10, 25, 2, 15)}},
		{"berlin hourly, spring: every real hour", "CRON_TZ=Europe/Berlin 0 * * * *",
			inUTC(2026, 3, 28, 23, 30), []time.Time{inUTC(2026, 3, 29, 0, 0), inUTC(2026, 3, 29, 1, 0), inUTC(2026, 3, 29, 2, 0)}},
		{"berlin hourly, fall: 02:00 CEST and 02:00 CET", "CRON_TZ=Europe/Berlin 0 * * * *",
			inUTC(2026, 10, 24, 23, 30), []time.Time{inUTC(2026, 10, 25, 0, 0), inUTC(2026, 10, 25, 1, 0), inUTC(2026, 10, 25, 2, 0)}},
		{"new york spring: 02:30 runs at 03:00 EDT", "CRON_TZ=America/New_York 30 2 * * *",
			inUTC(2026, 3, 7, 7, 30), []time.Time{inUTC(2026, 3, 8, 7, 0), inUTC(2026, 3, 9, 6, 30)}},
		{"new york fall: 01:30 runs once, at 01:30 EDT", "CRON_TZ=America/New_York 30 1 * * *",
			inUTC(2026, 10, 31, 5, 30), []time.Time{inUTC(2026, 11, 1, 5, 30), inUTC(2026, 11, 2, 6, 30)}},
		{"new york fall: weekdays 9-17 unchanged", "CRON_TZ=America/New_York 0 9-17/8 * * 1-5",
			inUTC(2026, 10, 30, 21, 0), []time.Time{inUTC(2026, 11, 2, 14, 0), inUTC(2026, 11, 2, 22, 0)}},
		{"no DST (Tokyo): unchanged", "CRON_TZ=Asia/Tokyo 30 2 * * *",
			inUTC(2026, 3, 28, 17, 30), []time.Time{inUTC(2026, 3, 29, 17, 30)}},
		{"UTC: unchanged", "30 2 * * *",
			inUTC(2026, 3, 28, 2, 30), []time.Time{inUTC(2026, 3, 29, 2, 30)}},
		{"havana spring: midnight is skipped, @daily runs at the jump (01:00 CDT)", "CRON_TZ=America/Havana @daily",
			inUTC(2026, 3, 7, 5, 0), []time.Time{inUTC(2026, 3, 8, 5, 0), inUTC(2026, 3, 9, 4, 0)}},
		{"havana fall: midnight twice, @daily runs at the first (00:00 CDT)", "CRON_TZ=America/Havana @daily",
			inUTC(2026, 10, 31, 4, 0), []time.Time{inUTC(2026, 11, 1, 4, 0), inUTC(2026, 11, 2, 5, 0)}},
		{"@daily in Berlin: midnight is never skipped", "CRON_TZ=Europe/Berlin @daily",
			inUTC(2026, 3, 28, 12, 0), []time.Time{inUTC(2026, 3, 28, 23, 0), inUTC(2026, 3, 29, 22, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := config.ParseSchedule(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			tm := NewTiming("x", s)
			at := tt.from
			for i, want := range tt.want {
				got := tm.Next(at)
				if !got.Equal(want) {
					t.Fatalf("activation %d after %s: %s, want %s", i+1, at.UTC().Format(time.RFC3339), got.UTC().Format(time.RFC3339), want.Format(time.RFC3339))
				}
				at = got
			}
		})
	}
}

// A day of the spring-forward and fall-back weeks: a daily job at a time
// inside the changed hour runs exactly once on every day (robfig/cron ran it
// on no day and on two).
func TestDailyJobOncePerDayAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"CRON_TZ=Europe/Berlin 30 2 * * *", "CRON_TZ=Europe/Berlin 0 2 * * *", "CRON_TZ=Europe/Berlin 59 2 * * *"} {
		s, err := config.ParseSchedule(spec)
		if err != nil {
			t.Fatal(err)
		}
		tm := NewTiming("x", s)
		for _, week := range []time.Time{inUTC(2026, 3, 25, 12, 0), inUTC(2026, 10, 21, 12, 0)} {
			perDay := map[string]int{}
			for at := tm.Next(week); at.Before(week.Add(7 * 24 * time.Hour)); at = tm.Next(at) {
				perDay[at.In(berlin).Format("2006-01-02")]++
			}
			for d := range 7 {
				day := week.Add(time.Duration(d+1) * 24 * time.Hour).In(berlin).Format("2006-01-02")
				if day >= week.Add(7*24*time.Hour).In(berlin).Format("2006-01-02") {
					break
				}
				if perDay[day] != 1 {
					t.Errorf("%s: ran %d times on %s, want once (%v)", spec, perDay[day], day, perDay)
				}
			}
		}
	}
}
