package flush

import "github.com/pacer-dev/pacer/internal/clock"

// Clock is the flusher's source of time: the submission time of a change
// (Now) and the delays before a commit and between retries (NewTimer). The
// scheduler passes its own clock (tests run it in a testing/synctest
// bubble, or substitute their own).
type Clock = clock.Clock
