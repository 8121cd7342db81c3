package cli

import (
	"fmt"
	"io"
	"net"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/store"
)

// checkAdminPort tries cfg's admin address before a first start creates
// the store: a start that cannot listen (the port is taken) then leaves no
// empty store and no lock file behind. A store that exists already is left
// to the usual order (its lock first, so that a daemon running on it is
// named rather than its port).
func checkAdminPort(cfg *config.Config) error {
	if cfg.Admin.Listen == "" || !store.Missing(cfg.Store) {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin.listen: %w", err)
	}
	if err := ln.Close(); err != nil {
		return fmt.Errorf("admin.listen: %w", err)
	}
	return nil
}

// beforeAction checks the names of an action's sources, and answers a
// reset without a store (resetWithoutStore); done: nothing more to do.
func beforeAction(w io.Writer, cfg *config.Config, action string, names []string, all bool) (done bool, err error) {
	for _, name := range names {
		if _, ok := cfg.Source(name); !ok {
			return false, fmt.Errorf("unknown source %q", name)
		}
	}
	return action == policy.ActionReset && resetWithoutStore(w, cfg, names, all), nil
}

// resetWithoutStore answers a reset before any daemon has created the
// store: there is nothing to reset, and creating the store here (as root,
// say) could leave one the service cannot write. It reports whether it
// answered.
func resetWithoutStore(w io.Writer, cfg *config.Config, names []string, all bool) bool {
	if !store.Missing(cfg.Store) || store.Vanished(cfg.Store) != nil {
		return false
	}
	if all {
		fmt.Fprintln(w, "no source is in error")
	}
	for _, name := range names {
		fmt.Fprintf(w, "%s: nothing to reset (no store yet: no daemon has run)\n", name)
	}
	return true
}
