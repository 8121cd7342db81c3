// Package cli implements pacer's command line (contract section 1): the
// daemon (run) and the commands that inspect and steer it.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pacer-dev/pacer/config"
)

// Version is pacer's version, printed by "pacer version".
const Version = "0.1.0"

// Exit statuses (contract section 1).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// Env is the process environment the commands see.
type Env struct {
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
}

// usageError is bad usage: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `usage:
  pacer run      [-config FILE] [-new-store]    run the daemon in the foreground
  pacer validate [-config FILE]                 check the config; print every problem
  pacer status   [-config FILE] [-json] [NAME]  state of every source (or one)
  pacer reset    [-config FILE] (NAME... | -all-errored)
  pacer trigger  [-config FILE] NAME            poll NAME now, outside its schedule
  pacer pause    [-config FILE] NAME [-reason TEXT]
  pacer resume   [-config FILE] NAME
  pacer history  [-config FILE] [-n 20] [-json] NAME
  pacer hosts    [-config FILE] [-json]         host groups: state, limits, learned limits
  pacer version
-config defaults to $PACER_CONFIG, else ./config.yaml.
`

// Main runs the command line args (without the program name) and returns
// the exit status.
func Main(args []string, env Env) int {
	if env.LookupEnv == nil {
		env.LookupEnv = os.LookupEnv
	}
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return exitUsage
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		err = cmdRun(rest, env)
	case "validate":
		err = cmdValidate(rest, env)
	case "status":
		err = cmdStatus(rest, env)
	case "history":
		err = cmdHistory(rest, env)
	case "hosts":
		err = cmdHosts(rest, env)
	case "reset", "pause", "resume", "trigger":
		err = cmdAction(cmd, rest, env)
	case "version", "-version", "--version":
		fmt.Fprintln(env.Stdout, "pacer", Version)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(env.Stdout, usage)
	default:
		err = usagef("unknown command %q", cmd)
	}
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "pacer: %s\n%s", escapeControls(ue.msg), usage)
		return exitUsage
	case errors.Is(err, flag.ErrHelp):
		return exitUsage
	}
	var ps config.Problems
	if errors.As(err, &ps) {
		// One line per problem, each starting with where it is.
		for _, p := range ps {
			fmt.Fprintln(env.Stderr, escapeControls(p.String()))
		}
		return exitFailure
	}
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintln(env.Stderr, "pacer:", escapeControls(line))
	}
	return exitFailure
}

// flags is a command's flag set with the -config flag every command takes.
type flags struct {
	*flag.FlagSet
	config *string
	cfg    *config.Config // once loaded
}

func newFlags(name string, env Env) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	def := "config.yaml"
	if v, ok := env.LookupEnv("PACER_CONFIG"); ok && v != "" {
		def = v
	}
	return &flags{FlagSet: fs, config: fs.String("config", def, "config file (default $PACER_CONFIG, else ./config.yaml)")}
}

// parse parses flags and positional arguments in any order
// ("status NAME -json" and "status -json NAME" alike).
func (f *flags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = f.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// load loads the config named by -config; a config this build cannot
// run (see unsupported) is reported as invalid.
func (f *flags) load(env Env) (*config.Config, error) {
	return f.loadWith(env, config.Options{})
}

// loadForStore loads the config named by -config for a command that only
// reads or steers the store: variables and files that only the polls need
// may be missing (config.Options.ForStore), as they are in an operator's
// shell when systemd's EnvironmentFile= gave them to the daemon.
func (f *flags) loadForStore(env Env) (*config.Config, error) {
	return f.loadWith(env, config.Options{ForStore: true})
}

// loadWith loads the config named by -config with opts.
func (f *flags) loadWith(env Env, opts config.Options) (*config.Config, error) {
	cfg, err := config.LoadWith(*f.config, env.LookupEnv, opts)
	if err != nil {
		return nil, f.missingDefault(env, err)
	}
	f.cfg = cfg
	return cfg, nil
}

// redact masks the loaded config's secrets in *err: an error may quote an
// expanded ${VAR} value, such as a store path (rule 3.12).
func (f *flags) redact(err *error) {
	if *err == nil || f.cfg == nil {
		return
	}
	var ps config.Problems
	if errors.As(*err, &ps) {
		return // problems are redacted already
	}
	*err = redactedError{msg: f.cfg.Redactor().Redact((*err).Error()), err: *err}
}

func cmdValidate(args []string, env Env) error {
	f := newFlags("validate", env)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("validate takes no arguments")
	}
	cfg, err := f.load(env)
	if err != nil {
		return err
	}
	for _, n := range cfg.Notes { // e.g. a source_files pattern that matches no file
		fmt.Fprintf(env.Stderr, "warning: %s\n", escapeControls(n))
	}
	fmt.Fprintf(env.Stdout, "%s: ok (%d sources, %d limit groups)\n", escapeControls(cfg.Path), len(cfg.Sources), len(cfg.Limits))
	return nil
}

// redactedError is err with its text redacted; errors.Is and errors.As still
// see err.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
