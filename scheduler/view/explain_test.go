package view

import (
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// TestExplain is the table of the sentences of contract section 11.2, one
// per situation, from the state, the config, now and the queue alone.
func TestExplain(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 41, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	src := func(errorAfter int) *config.Source {
		return &config.Source{Name: "api", Type: "http", ErrorAfter: errorAfter,
			Breaker: config.Breaker{Failures: 5, Cooldown: time.Minute}}
	}
	redact := config.NewRedactor("s3cret").Redact
	ran := at(-time.Minute)
	tests := []struct {
		name string
		src  *config.Source
		st   domain.SourceState
		q    QueueInfo
		want string
	}{
		{"backoff of error_after", src(10), domain.SourceState{ConsecutiveFailures: 3, LastRunAt: ran, NextRunAt: at(42 * time.Second)}, QueueInfo{},
			"backoff: failure 3 of 10, next attempt in 42 s"},
		{"backoff without error state", src(0), domain.SourceState{ConsecutiveFailures: 3, LastRunAt: ran, NextRunAt: at(41500 * time.Millisecond)}, QueueInfo{},
			"backoff: failure 3, next attempt in 42 s"},
		{"backoff overdue", src(10), domain.SourceState{ConsecutiveFailures: 1, LastRunAt: ran, NextRunAt: at(-time.Second)}, QueueInfo{},
			"backoff: failure 1 of 10, next attempt due now"},
		{"breaker open", src(10), domain.SourceState{ConsecutiveFailures: 5, LastRunAt: ran, BreakerState: breaker.Open, BreakerUntil: at(63 * time.Second), NextRunAt: at(64 * time.Second)}, QueueInfo{},
			"breaker open until 10:42:03 (cooldown 1m)"},
		{"breaker open until tomorrow", src(10), domain.SourceState{ConsecutiveFailures: 5, BreakerState: breaker.Open, BreakerUntil: at(24 * time.Hour)}, QueueInfo{},
			"breaker open until 2026-12-01 10:41:00 (cooldown 1m)"},
		{"breaker half-open", src(10), domain.SourceState{ConsecutiveFailures: 5, LastRunAt: ran, BreakerState: breaker.Open, BreakerUntil: at(-time.Second), NextRunAt: at(3 * time.Second)}, QueueInfo{},
			"breaker half-open: the next poll is its probe, in 3 s"},
		{"paused", src(10), domain.SourceState{Paused: true, PausedReason: "maintenance"}, QueueInfo{},
			"paused: maintenance"},
		{"paused in error", src(10), domain.SourceState{Paused: true, PausedReason: "maintenance", ErrorReason: "10 consecutive failures; last: x"}, QueueInfo{},
			"paused: maintenance"},
		{"error, redacted", src(10), domain.SourceState{ConsecutiveFailures: 10, ErrorReason: "10 consecutive failures; last: GET https://x/?k=s3cret: 502 Bad Gateway"}, QueueInfo{},
			"error: 10 consecutive failures; last: GET https://x/?k=***: 502 Bad Gateway; reset to resume"},
		{"throttled", src(10), domain.SourceState{LastOutcome: domain.OutcomeThrottled, LastRunAt: ran, NextRunAt: at(30 * time.Second)}, QueueInfo{},
			"throttled: next attempt in 30 s"},
		{"waiting for a permit", src(10), domain.SourceState{LastRunAt: ran}, QueueInfo{Busy: true, Queue: QueueGlobal, Ahead: 12},
			"waiting for a permit (12 ahead)"},
		{"first in the queue", src(10), domain.SourceState{}, QueueInfo{Busy: true, Queue: QueueGlobal},
			"waiting for a permit"},
		{"waiting for its group", src(10), domain.SourceState{}, QueueInfo{Busy: true, Queue: "partner-api", Ahead: 3},
			"waiting for a permit of group partner-api (3 ahead)"},
		{"polling", src(10), domain.SourceState{ConsecutiveFailures: 4, LastRunAt: ran}, QueueInfo{Busy: true},
			"polling now"},
		{"due", src(10), domain.SourceState{LastRunAt: ran, LastOutcome: domain.OutcomeSuccess, NextRunAt: at(0)}, QueueInfo{},
			"due now"},
		{"ok", src(10), domain.SourceState{LastRunAt: ran, LastOutcome: domain.OutcomeSuccess, NextRunAt: at(3 * time.Minute)}, QueueInfo{},
			"next poll in 3 min"},
		{"ok, hours", src(10), domain.SourceState{LastRunAt: ran, NextRunAt: at(2*time.Hour + 5*time.Minute)}, QueueInfo{},
			"next poll in 2 h 5 min"},
		{"pending", src(10), domain.SourceState{NextRunAt: at(5 * time.Second)}, QueueInfo{},
			"first poll in 5 s"},
		{"never loaded", src(10), domain.SourceState{}, QueueInfo{},
			"first poll at its first schedule tick"},
		{"pending days", src(10), domain.SourceState{NextRunAt: at(72 * time.Hour)}, QueueInfo{},
			"first poll in 3 d"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Explain(tc.src, &tc.st, now, tc.q, redact); got != tc.want {
				t.Errorf("Explain = %q\nwant      %q", got, tc.want)
			}
		})
	}
}

// TestExplainNilRedact: without a redactor the texts are shown as stored.
func TestExplainNilRedact(t *testing.T) {
	st := domain.SourceState{Paused: true, PausedReason: "a<b>"}
	if got := Explain(&config.Source{}, &st, time.Now(), QueueInfo{}, nil); got != "paused: a<b>" {
		t.Errorf("got %q", got)
	}
}

// TestRelative covers the unit boundaries of the relative durations.
func TestRelative(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1 s"}, {400 * time.Millisecond, "1 s"}, {42 * time.Second, "42 s"}, {89 * time.Second, "89 s"},
		{90 * time.Second, "2 min"}, {89 * time.Minute, "89 min"}, {90 * time.Minute, "1 h 30 min"},
		{3 * time.Hour, "3 h"}, {47*time.Hour + 59*time.Minute, "47 h 59 min"}, {49 * time.Hour, "2 d"},
	} {
		if got := Relative(c.d); got != c.want {
			t.Errorf("Relative(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{time.Minute, "1m"}, {20 * time.Second, "20s"}, {90 * time.Minute, "1h30m"}, {time.Hour, "1h"}, {1500 * time.Millisecond, "1.5s"}} {
		if got := ShortDuration(c.d); got != c.want {
			t.Errorf("ShortDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	if s := waitingText(QueueInfo{Busy: true, Queue: QueueGlobal, Ahead: 1}); !strings.Contains(s, "(1 ahead)") {
		t.Errorf("waitingText = %q", s)
	}
}
