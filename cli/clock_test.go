package cli

import (
	"github.com/pacer-dev/pacer/notify"
	"github.com/pacer-dev/pacer/scheduler"
)

// The daemon's clock (newRunner) is the scheduler's and the notifier's:
// every scheduler.Clock is a notify.Clock.
var (
	_ notify.Clock = scheduler.Clock(nil)
	_ notify.Clock = scheduler.RealClock{}
)
