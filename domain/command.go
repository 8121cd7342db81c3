package domain

import "time"

// Command is a request from the CLI to a running daemon (reset, pause,
// resume, trigger), delivered through the store so that it works with the
// admin API disabled. The daemon marks it done with a result.
type Command struct {
	ID        uint64
	Source    string
	Action    string // reset | pause | resume | trigger
	Reason    string
	CreatedAt time.Time
	// DoneAt is nil while the command is pending.
	DoneAt *time.Time
	// Result is "" on success, else the error text shown to the user.
	Result string
	// Code classifies a failed result: CodeNotFound, CodeConflict or "".
	Code string
	// Status is where the command is: CommandPending until the daemon
	// claims it (CommandApplying) or the CLI withdraws it
	// (CommandExpired); CommandDone once it has a result. The conditional
	// updates between these make "applied" and "expired" exclusive.
	Status string
}

// Statuses of a Command.
const (
	CommandPending  = "pending"
	CommandApplying = "applying"
	CommandDone     = "done"
	CommandExpired  = "expired"
)

// Codes of a failed Command's result.
const (
	CodeNotFound = "not_found"
	CodeConflict = "conflict"
)
