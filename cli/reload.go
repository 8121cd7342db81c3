package cli

// The daemon's answer to SIGHUP: the config read again, applied or
// rejected, and the memory of its load given back.

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler"
)

// releaseReloadMemory collects the garbage of a reload (the YAML node tree
// and the previous config) and returns the memory to the system, once,
// after READY=1. The collector's goal is twice the heap it last found live,
// and the runtime keeps what lies below that goal: a collection during the
// reload's load, which finds both configs and the node tree live, would
// otherwise leave the daemon holding that much more memory. At 100,000
// sources the RSS after three reloads was 586-764 MiB without it, 297 MiB
// with it (BENCHMARKS.md, issue 15). It runs in one goroutine of its own
// (the full collection takes ~0.3 s of CPU there) so that READY=1 is not
// delayed. After the start-up it makes no difference (measured): the
// polls' allocations fill the heap up to the goal again within seconds.
func releaseReloadMemory() {
	go debug.FreeOSMemory()
}

// parsedMost reports whether the load of cfg parsed most of its sources
// rather than reusing those of the config before (config.Options.Previous):
// only such a load leaves garbage worth the full collection of
// releaseReloadMemory (~0.3 s of CPU at 100,000 sources). A reload that
// reused the sources allocates a new slice of them and an index, and
// their predecessors' garbage stays below the collector's goal.
func parsedMost(cfg *config.Config) bool {
	return cfg.Reused() < len(cfg.Sources)/2
}

// reload re-reads the config; an invalid one is rejected with each problem
// logged, and the old one stays in force (rule 3.11). It returns the config
// in force afterwards (also in f.cfg, which masks the daemon's errors) and
// the number of problems of a rejected config.
func reload(f *flags, env Env, log *slog.Logger, sched *scheduler.Scheduler, cur *config.Config) (*config.Config, int) {
	cfg, err := f.loadWith(env, config.Options{Previous: cur})
	var ps config.Problems
	if err == nil {
		if err = sched.Reload(context.Background(), cfg); err != nil {
			log.Error("reload failed; old config stays in force", "err", err)
		}
	} else {
		if errors.As(err, &ps) {
			for _, p := range ps {
				log.Error("reload rejected: invalid config", "problem", p.String())
			}
		} else {
			log.Error("reload rejected", "err", err)
		}
	}
	if err != nil {
		f.cfg = cur
		return cur, len(ps)
	}
	logNotes(log, cfg)
	for _, key := range restartOnlyChanges(cur, cfg) {
		log.Warn("configuration key changed; it takes effect at the next restart", "key", key)
	}
	return cfg, 0
}

// logNotes logs the remarks on a loaded config that are not problems (a
// source_files pattern that matches no file) as warnings.
func logNotes(log *slog.Logger, cfg *config.Config) {
	for _, n := range cfg.Notes {
		log.Warn("config", "note", n)
	}
}

// restartOnlyChanges lists the keys changed between old and cur that a
// reload does not apply: the store, the admin listener and its token file,
// and the log settings are set up once, at start. Only the names are
// returned: a store URL may hold a password.
func restartOnlyChanges(old, cur *config.Config) []string {
	var keys []string
	for _, c := range []struct {
		key      string
		old, cur string
	}{
		{"store", old.Store, cur.Store},
		{"admin.listen", old.Admin.Listen, cur.Admin.Listen},
		{"admin.token_file", old.Admin.TokenFile, cur.Admin.TokenFile},
		{"log.level", old.Log.Level, cur.Log.Level},
		{"log.format", old.Log.Format, cur.Log.Format},
	} {
		if c.old != c.cur {
			keys = append(keys, c.key)
		}
	}
	return keys
}
