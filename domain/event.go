package domain

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Event is one notification waiting in the outbox (contract 10.2).
type Event struct {
	// Seq orders the events (assigned by the database at insert).
	Seq int64
	// ID is unique per event (32 hex digits; NewEventID), for receivers
	// to drop duplicates. A commit sets one when empty.
	ID     string
	Source string // "" for a host event
	Event  string // error | open | recovered | host_open | host_recovered
	// Host and Sources are a host event's host and its number of sources
	// (contract 13.7); "" and 0 for a source's event.
	Host                string
	Sources             int
	State               string
	PreviousState       string
	Reason              string
	ConsecutiveFailures int
	At                  time.Time
	// Reminder marks a repeated error event (notify.remind_every,
	// contract 15.3): the source is still in error.
	Reminder bool
	// Attempts counts the failed deliveries so far.
	Attempts int
	// NextAttemptAt is when it may be claimed again after a failure.
	NextAttemptAt time.Time
	// ClaimedBy and ClaimUntil hold the claim of a sender.
	ClaimedBy  string
	ClaimUntil time.Time
}

// Key is what orders the event among others: its source's name, or for a
// host event "host " and its host (a space never occurs in a source's
// name, so the two never meet). Events of one key go out in order.
func (e *Event) Key() string {
	if e.Host != "" {
		return HostEventPrefix + e.Host
	}
	return e.Source
}

// HostEventPrefix starts the key (Key) of a host event.
const HostEventPrefix = "host "

// NewEventID returns a random 128-bit id in hex.
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// EventClaim asks for up to Limit events due at Now, claimed by Member
// until Until.
type EventClaim struct {
	Member     string
	Now, Until time.Time
	Limit      int
}

// Batch is what one commit writes in one transaction: either all of it is
// committed or none of it.
type Batch struct {
	States  []SourceState
	Records []PollRecord
	// Events go to the outbox; each must name a source.
	Events []Event
}

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool {
	return len(b.States) == 0 && len(b.Records) == 0 && len(b.Events) == 0
}
