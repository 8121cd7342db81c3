package domain

import "time"

// HostState is the stored state of one host group (contract section 13):
// its throttling, breaker and learned limits, encoded by the scheduler's
// host room (Data is opaque to the store), and when it was written.
type HostState struct {
	Host      string
	Data      []byte
	UpdatedAt time.Time
}
