package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/dashboard"
	"github.com/pacer-dev/pacer/notify"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

func cmdRun(args []string, env Env) (err error) {
	f := newFlags("run", env)
	newStore := f.Bool("new-store", false, "start with a new, empty store where the lock file records one that is missing (also PACER_NEW_STORE=1)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("run takes no arguments")
	}
	restoreGC := startupGC()
	defer restoreGC()
	pre := startPreload(*f.config, env.LookupEnv)
	cfg, err := f.load(env)
	if err != nil {
		pre.release()
		return err
	}
	lock, states := pre.take(cfg.Store)
	log := newLogger(cfg.Log, env)
	logNotes(log, cfg)
	// From here on an error may quote an expanded ${VAR} value (the store
	// path, the listen address): rule 3.12 masks it, with the secrets of
	// the config in force (f.cfg, which a reload replaces).
	defer f.redact(&err)

	if lock, err = daemonLock(cfg, lock); err != nil {
		return err
	}
	closed := true // the store closed in time: the lock may be given back
	if lock != nil {
		defer func() {
			if closed {
				_ = lock.Release()
			}
		}()
	}
	st, err := store.Open(cfg.Store, store.Options{Logger: log, Lock: lock, NewStore: *newStore || envTrue(env, "PACER_NEW_STORE")})
	if err != nil {
		return fmt.Errorf("open store %s: %w", cfg.Redactor().Redact(cfg.Store), err)
	}
	defer func() { closed = closeStore(st, log, storeCloseGrace) }()

	d, err := newRunner(cfg, st, log)
	if err != nil {
		return err
	}
	defer d.closeListener()
	if err := d.start(states); err != nil {
		return err
	}
	restoreGC()
	return d.serve(f, env)
}

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

// storeCloseGrace bounds the store's Close at exit: a statement stuck in
// SQLite's busy timeout (another process holds the write lock) would keep
// the daemon up to 5 s past shutdown_timeout.
const storeCloseGrace = time.Second

// closeStore closes st within grace and reports whether it did. When it
// did not, the daemon exits anyway (the process's exit closes what is
// left, and the state that could not be committed was logged by the
// final flush); its lock is then not given back before the exit, so that
// no other daemon opens the store while this one still has it open.
func closeStore(st *store.Store, log *slog.Logger, grace time.Duration) bool {
	done := make(chan error, 1)
	go func() { done <- st.Close() }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("store: close", "err", err)
		}
		return true
	case <-t.C:
		log.Warn("store: close did not finish in time; exiting without waiting for it", "grace", grace)
		return false
	}
}

// daemonLock is the lock a daemon on cfg's store holds: the preload's
// (nil if it took none) or a new one; a member of a cluster gives the
// preload's exclusive lock back for the shared one (rule 8).
func daemonLock(cfg *config.Config, lock *store.Lock) (*store.Lock, error) {
	if cfg.Cluster.Set {
		if lock != nil {
			if err := lock.Release(); err != nil {
				return nil, err
			}
		}
		return memberLock(cfg.Store)
	}
	if lock != nil {
		return lock, nil
	}
	return store.AcquireLock(cfg.Store)
}

// runner is what `pacer run` runs once its store is open: the scheduler,
// the cluster member (nil on a single daemon), the admin server (nil
// without admin.listen) and the signals it answers.
type runner struct {
	cfg   *config.Config
	log   *slog.Logger
	sched *scheduler.Scheduler
	send  *notify.Sender // delivers the outbox's notifications (contract 10)
	mb    *member
	srv   *http.Server
	ln    net.Listener
	sigs  chan os.Signal
	conc  int // the effective concurrency cap, for the start line
}

// newRunner builds the daemon's parts; nothing runs yet.
func newRunner(cfg *config.Config, st *store.Store, log *slog.Logger) (*runner, error) {
	token, err := readToken(cfg.Admin.TokenFile)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Exec polls' leftovers (setsid, double forks) are reparented to the
	// daemon, so that each poll finds and kills them when it ends.
	if err := sources.BecomeSubreaper(); err != nil {
		log.Warn("exec polls cannot find descendants that leave their process group", "err", err)
	}
	// Results kept for delivery are spooled to unlinked files; one left by
	// a crash between create and unlink is removed (contract 9.5).
	if n, err := sources.RemoveSpool(""); err != nil {
		log.Warn("cannot remove leftover spool files", "err", err)
	} else if n > 0 {
		log.Info("removed leftover spool files", "count", n)
	}
	fdLimit, fdCapOf := descriptorCap(cfg, log)
	d := &runner{cfg: cfg, log: log, conc: cfg.Concurrency}
	if fdLimit > 0 {
		d.conc = min(d.conc, fdLimit)
	}
	var own scheduler.Ownership
	var clock scheduler.Clock // nil: the real clock
	if cfg.Cluster.Set {
		if d.mb, err = newMember(cfg, st, log, &d.sched); err != nil {
			return nil, err
		}
		own = d.mb.m
		clock = scheduler.DatabaseClock(d.mb.clock, d.mb.m.ClockOffset)
		// Measured before the scheduler starts, so that its clock does
		// not jump at the member's first round; if the database does not
		// answer now, that round measures it.
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Cluster.Lease/2)
		_, _ = d.mb.m.MeasureOffset(ctx)
		cancel()
	}
	memberName := cfg.Cluster.MemberName()
	if d.mb != nil {
		memberName = d.mb.m.Name()
	}
	if d.send, err = notify.New(cfg.Notify, cfg.Redactor(), notify.Options{Outbox: st, Logger: log, Registry: reg, Member: memberName, Sole: d.mb == nil}); err != nil {
		return nil, err
	}
	d.sched, err = scheduler.New(cfg, scheduler.Options{Store: st, Logger: log, Registry: reg, DescriptorCap: fdCapOf, Ownership: own,
		Clock: clock, EventsCommitted: d.send.Wake, EventsDropped: d.send.CountDropped})
	if err != nil {
		return nil, err
	}
	var clusterView admin.ClusterView
	if d.mb != nil {
		if err := d.mb.register(reg, d.sched); err != nil {
			return nil, fmt.Errorf("cluster metrics: %w", err)
		}
		clusterView = d.mb
	}
	// The signal handlers come before the admin port opens: a SIGTERM
	// sent once it listens waits in d.sigs for serve, instead of killing
	// the process before start installs them.
	d.sigs = make(chan os.Signal, 4)
	signal.Notify(d.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := d.listen(token, reg, clusterView); err != nil {
		signal.Stop(d.sigs)
		d.closeListener()
		return nil, err
	}
	return d, nil
}

// listen opens the admin listener (none without admin.listen) and builds
// its server: the API, the metrics and the status page.
func (d *runner) listen(token string, reg *prometheus.Registry, clusterView admin.ClusterView) error {
	if d.cfg.Admin.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", d.cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin.listen: %w", err)
	}
	d.ln = ln
	var members dashboard.ClusterView
	if clusterView != nil {
		members = clusterView
	}
	dash, err := dashboard.New(d.sched, dashboard.Options{Token: token, Logger: d.log, Cluster: members})
	if err != nil {
		return err
	}
	// At most adminConns connections (and one being accepted): the admin
	// port's share of the descriptor headroom (rule 7.3).
	lim := admin.LimitListener(ln, adminConns)
	d.ln = lim
	d.srv = admin.NewServer(admin.NewHandler(d.sched, reg, admin.Options{Token: token, Logger: d.log, Dashboard: dash, Cluster: clusterView}), lim)
	return nil
}

// closeListener closes the admin listener: Serve closes it too; this
// covers a failed start.
func (d *runner) closeListener() {
	if d.ln != nil {
		_ = d.ln.Close()
	}
}

// start starts the scheduler (from the preloaded states when there are
// some), the cluster member and the admin server, in that order, the
// signal handlers being in place (newRunner): READY=1 follows once every
// source is loaded.
func (d *runner) start(states []store.SourceState) error {
	var err error
	if states != nil {
		err = d.sched.StartFrom(states)
	} else {
		err = d.sched.Start(context.Background())
	}
	if err != nil {
		signal.Stop(d.sigs)
		return err
	}
	d.send.Start()
	if d.mb != nil {
		d.mb.start()
		d.log.Info("cluster member started", "member", d.mb.m.Name(), "lease", d.cfg.Cluster.Lease, "cluster_concurrency", d.cfg.Cluster.Concurrency)
	}
	if d.srv != nil {
		go func() {
			if err := d.srv.Serve(d.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("admin server stopped", "err", err)
			}
		}()
	}
	return nil
}

// serve reports ready, answers SIGHUP with a reload until SIGTERM or
// SIGINT, then shuts down: the admin server and the polls stop together,
// the member leaves once the polls' states are committed (rule 3.10).
func (d *runner) serve(f *flags, env Env) error {
	defer signal.Stop(d.sigs)
	redact := d.cfg.Redactor()
	d.log.Info("pacer started", "version", Version, "sources", len(d.cfg.Sources), "concurrency", d.conc,
		"store", redact.Redact(d.cfg.Store), "admin", redact.Redact(d.cfg.Admin.Listen), "pid", os.Getpid())
	status := func() string { return statusLine(d.sched.Summary()) }
	sdNotify("READY=1\nSTATUS=" + status())
	supCtx, stopSupervise := context.WithCancel(context.Background())
	defer stopSupervise()
	if wd := watchdogInterval(); wd > 0 || os.Getenv("NOTIFY_SOCKET") != "" {
		go supervise(supCtx, wd, 10*time.Second, func(ctx context.Context) error { return d.sched.Healthy(ctx, max(wd/2, 2*time.Second)) },
			status, sdNotify, d.log)
	}
	for sig := range d.sigs {
		if sig == syscall.SIGHUP {
			sdNotify(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
			prev := d.cfg
			d.cfg = reload(f, env, d.log, d.sched, d.cfg)
			// A rejected config was parsed whole (its problems need the
			// node tree): its garbage is released like a full parse's.
			release := d.cfg == prev || parsedMost(d.cfg)
			d.send.SetConfig(d.cfg.Notify, d.cfg.Redactor())
			if d.mb != nil {
				d.mb.setSources(d.cfg)
			}
			sdNotify("READY=1\nSTATUS=" + status())
			if release {
				releaseReloadMemory()
			}
			continue
		}
		d.log.Info("shutting down", "signal", sig.String(), "timeout", d.cfg.ShutdownTimeout)
		sdNotify("STOPPING=1")
		stopSupervise()
		break
	}
	adminDone := stopAdmin(d.srv, min(2*time.Second, d.cfg.ShutdownTimeout))
	sendDone := make(chan struct{})
	go func() {
		// Deliveries in flight are cut off: their events stay in the
		// outbox for the next start (or another member).
		defer close(sendDone)
		if !d.send.Stop(min(time.Second, d.cfg.ShutdownTimeout)) {
			d.log.Warn("shutdown: notification deliveries did not stop in time; leaving them")
		}
	}()
	err := d.sched.Shutdown(d.cfg.ShutdownTimeout)
	<-sendDone
	if d.mb != nil {
		d.mb.leave() // the polls have ended and their states are committed
	}
	<-adminDone
	if err != nil {
		return err
	}
	d.log.Info("pacer stopped")
	return nil
}

// stopAdmin stops the admin server (nil: none) while the polls stop: it
// accepts no more connections at once and gives requests in flight up to
// grace, so that a shutdown takes no longer than shutdown_timeout. The
// returned channel is closed once the server is down.
func stopAdmin(srv *http.Server, grace time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if srv == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close() // best effort: clients of a stopping daemon are cut off
		}
	}()
	return done
}

// reload re-reads the config; an invalid one is rejected with each problem
// logged, and the old one stays in force (rule 3.11). It returns the config
// in force afterwards (also in f.cfg, which masks the daemon's errors).
func reload(f *flags, env Env, log *slog.Logger, sched *scheduler.Scheduler, cur *config.Config) *config.Config {
	cfg, err := f.loadWith(env, config.Options{Previous: cur})
	if err == nil {
		if err = sched.Reload(context.Background(), cfg); err != nil {
			log.Error("reload failed; old config stays in force", "err", err)
		}
	} else {
		var ps config.Problems
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
		return cur
	}
	logNotes(log, cfg)
	for _, key := range restartOnlyChanges(cur, cfg) {
		log.Warn("configuration key changed; it takes effect at the next restart", "key", key)
	}
	return cfg
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

func newLogger(c config.Log, env Env) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(env.Stderr, opts))
}

// envTrue reports whether the environment variable key is set to a true
// value (1, true, yes).
func envTrue(env Env, key string) bool {
	v, _ := env.LookupEnv(key)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// readToken reads the admin token file (see config.ReadToken).
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	t, err := config.ReadToken(path)
	if err != nil {
		return "", fmt.Errorf("admin.token_file: %w", err)
	}
	return t, nil
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, for RELOADING=1.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano() / 1000
}

// redactedError is err with its text redacted; errors.Is and errors.As still
// see err.
type redactedError struct {
	msg string
	err error
}

// startupGC makes the collector run less often until the returned func is
// called (once; later calls do nothing). Start-up allocates the config's
// YAML node tree and every source's stored state, most of it garbage once
// the daemon runs: with 100,000 sources the default setting collects many
// times over a heap that only grows. A GOGC set higher, or off, is kept.
func startupGC() (restore func()) {
	const startupPercent = 400
	prev := debug.SetGCPercent(startupPercent)
	if prev < 0 || prev >= startupPercent {
		debug.SetGCPercent(prev)
		return func() {}
	}
	return sync.OnceFunc(func() { debug.SetGCPercent(prev) })
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
