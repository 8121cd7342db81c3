//go:build !linux

package sources

import "errors"

// BecomeSubreaper is only available on Linux.
func BecomeSubreaper() error { return errors.New("child subreaper: not supported on this platform") }

func isSubreaper() bool { return false }

// waitExited cannot wait without reaping here: the poll kills its group
// after os/exec has reaped the leader.
func waitExited(int) bool { return false }

func sweep(int, string) int { return 0 }
