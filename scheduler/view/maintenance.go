package view

import (
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/maintenance"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// Maintenance is the maintenance window a source is in (contract 15.1), in
// the source object; nil outside one.
type Maintenance struct {
	Name   string     `json:"name"`
	Action string     `json:"action"` // pause | silence
	Until  *time.Time `json:"until"`
}

// ViewIn is View within cfg's maintenance windows: a source in a pause
// window (and not paused by an operator) shows paused with the reason
// "maintenance: NAME until 02:30" and, as next_run_at, its first tick after
// the window; the window is in the maintenance field.
func ViewIn(cfg *config.Config, src *config.Source, st *domain.SourceState, now time.Time, redact func(string) string) SourceObject {
	shown, w := maintenance.Overlay(cfg, src.Name, st, now)
	o := View(src, shown, now, redact)
	if w == nil {
		return o
	}
	o.Maintenance = &Maintenance{Name: w.Name, Action: w.Action, Until: utc(&w.Until)}
	if shown != st {
		o.NextRunAt = utc(policy.UTCPtr(maintenance.Resume(*w, policy.NewTiming(src.Name, src.Schedule), st)))
	}
	return o
}

// ExplainIn is Explain within cfg's maintenance windows: "paused:
// maintenance: NAME until 02:30" in a pause window; in a silence window the
// explanation goes on with "; notifications held (maintenance: NAME until
// 02:30)".
func ExplainIn(cfg *config.Config, src *config.Source, st *domain.SourceState, now time.Time, q QueueInfo, redact func(string) string) string {
	shown, w := maintenance.Overlay(cfg, src.Name, st, now)
	why := Explain(src, shown, now, q, redact)
	if w != nil && w.Action == config.MaintenanceSilence {
		why += "; notifications held (" + w.Reason(now) + ")"
	}
	return why
}
