// Package view is the presentation of pacer's sources shared by the admin
// API, the dashboard and the CLI: the source object of contract section 4
// (SourceObject, View), the explanation of a source's wait (Explain, with
// QueueInfo), the dashboard's rows (Row) and relative times (Relative,
// ShortDuration). Everything here is a pure function of a source's
// configuration, its stored state and now; the scheduler fills these types
// under its lock, the CLI from the store.
package view

import (
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// SourceObject is a source as status and the admin API show it (contract
// section 4). Times are UTC; nil marshals as null.
type SourceObject struct {
	Name                string     `json:"name"`
	Type                string     `json:"type"`
	Schedule            string     `json:"schedule"`
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	Breaker             string     `json:"breaker"`
	NextRunAt           *time.Time `json:"next_run_at"`
	LastRunAt           *time.Time `json:"last_run_at"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastError           string     `json:"last_error"`
	LastErrorAt         *time.Time `json:"last_error_at"`
	ErrorReason         string     `json:"error_reason"`
	PausedReason        string     `json:"paused_reason"`
	PollsTotal          int64      `json:"polls_total"`
	FailuresTotal       int64      `json:"failures_total"`
	ThrottledTotal      int64      `json:"throttled_total"`
	// LastChangedAt is the end of the last poll whose result changed, and
	// ChangesTotal counts them (contract 9.2).
	LastChangedAt *time.Time `json:"last_changed_at"`
	ChangesTotal  int64      `json:"changes_total"`
	// Owner is the cluster member that polls the source (rule 8.6); nil
	// when none does or on a single daemon.
	Owner *string `json:"owner"`
	// Host is the host group of an http source (contract 13.7); nil for
	// exec sources.
	Host *string `json:"host"`
	// Maintenance is the maintenance window the source is in (ViewIn);
	// absent outside one.
	Maintenance *Maintenance `json:"maintenance,omitempty"`
}

// View builds the source object of src from its state at now. redact masks
// secrets in the error texts (they are stored redacted already; this is a
// second line of defence for a store written by an older config).
func View(src *config.Source, st *domain.SourceState, now time.Time, redact func(string) string) SourceObject {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	o := SourceObject{
		Name:                src.Name,
		Type:                src.Type,
		Schedule:            redact(src.ScheduleSpec),
		State:               policy.StateOf(st, now),
		ConsecutiveFailures: st.ConsecutiveFailures,
		Breaker:             policy.BreakerOf(st, now),
		NextRunAt:           utc(st.NextRunAt),
		LastRunAt:           utc(st.LastRunAt),
		LastSuccessAt:       utc(st.LastSuccessAt),
		LastError:           redact(st.LastError),
		LastErrorAt:         utc(st.LastErrorAt),
		ErrorReason:         redact(st.ErrorReason),
		PausedReason:        redact(st.PausedReason),
		PollsTotal:          st.PollsTotal,
		FailuresTotal:       st.FailuresTotal,
		ThrottledTotal:      st.ThrottledTotal,
		LastChangedAt:       utc(st.LastChangedAt),
		ChangesTotal:        st.ChangesTotal,
	}
	if o.State == policy.StatePaused || o.State == policy.StateError && src.ErrorReprobe <= 0 {
		o.NextRunAt = nil // a re-probed source in error shows its re-probe
	}
	if src.Host != "" {
		h := src.Host
		o.Host = &h
	}
	if o.Breaker == "" {
		o.Breaker = breaker.Closed
	}
	return o
}

func utc(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC().Truncate(time.Millisecond)
	return &u
}
