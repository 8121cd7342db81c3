package cli

import (
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestMain doubles as the pacer binary: with PACER_TEST_MAIN=1 the test
// binary runs the command line in os.Args after "--" (so tests can run a
// real daemon process without building one), optionally under a lowered
// descriptor limit (PACER_TEST_NOFILE).
func TestMain(m *testing.M) {
	if os.Getenv("PACER_TEST_MAIN") == "1" {
		if v := os.Getenv("PACER_TEST_NOFILE"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err == nil {
				err = unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n})
			}
			if err != nil {
				os.Stderr.WriteString("PACER_TEST_NOFILE: " + err.Error() + "\n")
				os.Exit(3)
			}
		}
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		os.Exit(Main(args, Env{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv}))
	}
	goleak.VerifyTestMain(m)
}
