package domain

import "time"

// Outcomes of a poll, as recorded in history.
const (
	OutcomeSuccess     = "success"
	OutcomeFailure     = "failure"
	OutcomeThrottled   = "throttled"
	OutcomeInterrupted = "interrupted"
)

// SourceState is the durable state of one source (rule 3.8). The zero value
// (apart from Name) is a source that was never polled.
type SourceState struct {
	Name        string
	Fingerprint string

	ConsecutiveFailures  int
	ConsecutiveThrottles int
	// NextRunAt is when the source may next be polled; nil in error and paused.
	NextRunAt     *time.Time
	LastRunAt     *time.Time
	LastSuccessAt *time.Time
	LastError     string
	// LastErrorAt is when LastError happened (the end of that poll); nil
	// when there is none, or for a state saved before the column existed.
	LastErrorAt    *time.Time
	LastOutcome    string
	BreakerState   string // the breaker package's state names ("closed", "open", "half-open"); "" = closed
	BreakerUntil   *time.Time
	ErrorReason    string // non-empty = the source is in the error state
	Paused         bool
	PausedReason   string
	PollsTotal     int64
	FailuresTotal  int64
	ThrottledTotal int64
	// HistorySeq is the Seq of the source's newest poll record: the daemon
	// numbers records itself (HistorySeq+1, then stores both in one batch),
	// so that saving a record needs no read of the records table.
	HistorySeq int64
	UpdatedAt  time.Time

	// The last delivered result (contract 9.1, 9.2): the validators of its
	// 200 answer (ETag, Last-Modified; "" for none), sent on the next GET,
	// and the SHA-256 of its body or stdout (hex), to which the next
	// result is compared. Saved in the same commit as the rest of the state.
	ETag         string
	LastModified string
	Digest       string
	// LastChangedAt is the end of the last poll whose result changed; nil
	// for none. ChangesTotal counts those polls.
	LastChangedAt *time.Time
	ChangesTotal  int64

	// IncidentOpen reports an incident that an error or open event opened
	// and no recovered event closed yet, though the state no longer shows
	// it: the source was reset, or its configuration changed, while in
	// error, open or half-open (contract 10.1). Its next successful poll
	// sends recovered and clears it. Saved with the rest of the state, so
	// that it survives a restart and a hand-over to another member.
	IncidentOpen bool

	// RemindAt is when the next reminder of a source in error is due
	// (notify.remind_every, contract 15.3); nil when none is. Kept with
	// the state, so that a restart or another member neither skips nor
	// repeats one.
	RemindAt *time.Time
	// HeldEvent is what a silence window kept from the receivers (contract
	// 15.1): "" nothing; "error" or "open", an incident they were not told
	// of; "recovered", the end of one they were told of. At the window's
	// end the source's state then is notified (maintenance.Release).
	HeldEvent string
}

// PollRecord is one entry of a source's poll history. Its JSON form is the
// one the admin API shows.
type PollRecord struct {
	Source string `json:"-"`
	// Seq numbers a source's records from 1 in the order they were saved:
	// the higher, the newer. A commit keeps a Seq given (> 0; a record
	// with the Seq of a stored one replaces it for readers) and numbers a
	// record with Seq 0 after the source's newest stored one. History
	// returns it.
	Seq        int64     `json:"-"`
	StartedAt  time.Time `json:"started_at"`
	DurationMs int64     `json:"duration_ms"`
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error"`
	StatusCode *int      `json:"status_code,omitempty"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	Bytes      int64     `json:"bytes"`
	// Changed reports a successful poll whose result differs from the last
	// delivered one (contract 9.2); false for an unchanged result (equal
	// digest, or a 304) and for any other outcome.
	Changed bool `json:"changed"`
	// Digest is the SHA-256 (hex) of the body or stdout of a successful
	// poll; "" for a 304 or a failure.
	Digest string `json:"digest"`
	// Condition is the expression of the condition that failed the poll
	// (contract 14.5), or "".
	Condition string `json:"condition"`
}
