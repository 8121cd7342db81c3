// Command pacer polls many external sources on cron schedules without ever
// starting more work than it can finish. See README.md.
package main

import (
	"os"

	"github.com/pacer-dev/pacer/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv}))
}
