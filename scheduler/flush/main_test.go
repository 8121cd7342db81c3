package flush

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: Run
// must end with its context, and a commit with its store.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
