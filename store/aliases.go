package store

import "github.com/pacer-dev/pacer/domain"

// The domain types, constants and rules under the names they had when
// they lived in this package, so that callers outside it compile
// unchanged while they move to package domain. They go once callers use
// domain; the store's own code uses domain's names already.

type (
	SourceState = domain.SourceState
	PollRecord  = domain.PollRecord
	Command     = domain.Command
	Event       = domain.Event
	EventClaim  = domain.EventClaim
	Batch       = domain.Batch
	Fence       = domain.Fence
	Member      = domain.Member
	Claim       = domain.Claim
)

// Outcomes of a poll (domain.OutcomeSuccess ...).
const (
	OutcomeSuccess     = domain.OutcomeSuccess
	OutcomeFailure     = domain.OutcomeFailure
	OutcomeThrottled   = domain.OutcomeThrottled
	OutcomeInterrupted = domain.OutcomeInterrupted
)

// Statuses of a Command (domain.CommandPending ...).
const (
	CommandPending  = domain.CommandPending
	CommandApplying = domain.CommandApplying
	CommandDone     = domain.CommandDone
	CommandExpired  = domain.CommandExpired
)

// Shards is domain.Shards.
const Shards = domain.Shards

// ShardOf is domain.ShardOf.
func ShardOf(name, group string) int { return domain.ShardOf(name, group) }

// NameHash is domain.NameHash.
func NameHash(name string) uint64 { return domain.NameHash(name) }

// NewEventID is domain.NewEventID.
func NewEventID() string { return domain.NewEventID() }
