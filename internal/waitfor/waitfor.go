// Package waitfor is the tests' one way to wait for a condition: poll it
// with a deadline, never sleep for a guessed time. Inside a testing/synctest
// bubble the polling runs on the bubble's fake clock. It is imported by
// tests only.
package waitfor

import (
	"errors"
	"testing"
	"time"
)

// Every is how often a condition is polled.
const Every = 10 * time.Millisecond

// True polls cond every 10 ms until it holds, failing tb after within.
func True(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	NoError(tb, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// NoError polls cond every 10 ms until it returns nil, failing tb after
// within with the last error.
func NoError(tb testing.TB, within time.Duration, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if err == errNotYet {
				tb.Fatalf("timed out after %v waiting for %s", within, what)
			}
			tb.Fatalf("timed out after %v waiting for %s: %v", within, what, err)
		}
		time.Sleep(Every)
	}
}

// errNotYet is a false condition of True.
var errNotYet = errors.New("not yet")
