package scheduler

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// worker, group admitter, flusher and poll must end with Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
