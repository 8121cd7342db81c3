package store_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// Environment of a child process started by startChild: what it must do,
// and on which store.
const (
	childModeEnv = "PACER_STORE_TEST_CHILD"
	childDSNEnv  = "PACER_STORE_TEST_DSN"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(runChild(mode, os.Getenv(childDSNEnv)))
	}
	goleak.VerifyTestMain(m)
}

// runChild is the child side of startChild: it does what mode says, prints
// the mode on standard output, then blocks until its standard input closes
// or it is killed. It never releases anything itself.
func runChild(mode, dsn string) int {
	switch mode {
	case "lock":
		if _, err := store.AcquireLock(dsn); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
	case "daemon":
		// A daemon's start: the lock, then the store (created, locked,
		// recorded in the lock file).
		l, err := store.AcquireLock(dsn)
		if err == nil {
			_, err = store.Open(dsn, store.Options{Lock: l})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
	case "save":
		s, err := store.Open(dsn, store.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		st := domain.SourceState{Name: "crash", PollsTotal: 41, NextRunAt: ptr(time.Now().Add(time.Hour))}
		rec := domain.PollRecord{Source: "crash", StartedAt: time.Now(), Outcome: domain.OutcomeSuccess}
		if err := s.SaveBatch(context.Background(), []domain.SourceState{st}, []domain.PollRecord{rec}, 10); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
	default:
		fmt.Fprintln(os.Stderr, "child: unknown mode", mode)
		return 2
	}
	fmt.Println(mode)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// startChild re-executes the test binary as a child that does mode on dsn
// and waits to be killed; it returns once the child has done it. The child
// is killed at the end of the test if it still runs.
func startChild(t *testing.T, mode, dsn string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childDSNEnv+"="+dsn)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != mode {
		t.Fatalf("child said %q, %v; want %q", line, err, mode)
	}
	return cmd
}

// kill9 kills the child with SIGKILL and waits until it is gone, so that
// the kernel has closed its files.
func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("killed child exited cleanly")
	}
}
