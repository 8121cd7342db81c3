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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/dashboard"
	"github.com/pacer-dev/pacer/domain"
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

	if err := checkAdminPort(cfg); err != nil {
		return err
	}
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
	trimTextRSS() // the start-up's code need not stay resident
	return d.serve(f, env)
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
	// reloads says whether the last reload was rejected (/readyz, the
	// page, the metrics).
	reloads *reloadStatus
}

// newRunner builds the daemon's parts; nothing runs yet.
func newRunner(cfg *config.Config, st *store.Store, log *slog.Logger) (*runner, error) {
	token, err := readToken(cfg.Admin.TokenFile)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	prepareExecPolls(log)
	fdLimit, fdCapOf := descriptorCap(cfg, log)
	d := &runner{cfg: cfg, log: log, conc: cfg.Concurrency}
	if d.reloads, err = newReloadStatus(reg, time.Now()); err != nil {
		return nil, err
	}
	if fdLimit > 0 {
		d.conc = min(d.conc, fdLimit)
	}
	own, clock, err := d.joinCluster(st)
	if err != nil {
		return nil, err
	}
	memberName := cfg.Cluster.MemberName()
	if d.mb != nil {
		memberName = d.mb.m.Name()
	}
	if d.send, err = notify.New(cfg.Notify, cfg.Redactor(), notify.Options{Outbox: st, Logger: log, Registry: reg, Member: memberName, Sole: d.mb == nil, Clock: clock}); err != nil {
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

// prepareExecPolls readies the process for exec polls and deliveries:
// their leftovers (setsid, double forks) are reparented to the daemon, so
// that each poll finds and kills them when it ends; results kept for
// delivery are spooled to unlinked files, and one left by a crash between
// create and unlink is removed (contract 9.5).
func prepareExecPolls(log *slog.Logger) {
	if err := sources.BecomeSubreaper(); err != nil {
		log.Warn("exec polls cannot find descendants that leave their process group", "err", err)
	}
	if n, err := sources.RemoveSpool(""); err != nil {
		log.Warn("cannot remove leftover spool files", "err", err)
	} else if n > 0 {
		log.Info("removed leftover spool files", "count", n)
	}
}

// joinCluster builds the cluster member of a daemon in a cluster (d.mb;
// nothing on a single daemon) and returns the scheduler's ownership filter
// and the daemon's clock, the scheduler's and the notifier's (nil and
// RealClock on a single daemon: every source, the wall clock).
func (d *runner) joinCluster(st *store.Store) (scheduler.Ownership, scheduler.Clock, error) {
	if !d.cfg.Cluster.Set {
		return nil, scheduler.RealClock{}, nil
	}
	var err error
	if d.mb, err = newMember(d.cfg, st, d.log, &d.sched); err != nil {
		return nil, nil, err
	}
	// Measured before the scheduler starts, so that its clock does not
	// jump at the member's first round; if the database does not answer
	// now, that round measures it.
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Cluster.Lease/2)
	_, _ = d.mb.m.MeasureOffset(ctx)
	cancel()
	return d.mb.m, scheduler.DatabaseClock(d.mb.clock, d.mb.m.ClockOffset), nil
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
	dash, err := dashboard.New(d.sched, dashboard.Options{Token: token, Logger: d.log, Cluster: members, Warning: d.reloads.Warning})
	if err != nil {
		return err
	}
	// At most adminConns connections (and one being accepted): the admin
	// port's share of the descriptor headroom (rule 7.3).
	lim := admin.LimitListener(ln, adminConns)
	d.ln = lim
	d.srv = admin.NewServer(admin.NewHandler(d.sched, reg, admin.Options{Token: token, Logger: d.log, Dashboard: dash, Cluster: clusterView,
		Warning: d.reloads.Warning}), lim)
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
func (d *runner) start(states []domain.SourceState) error {
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
			var problems int
			d.cfg, problems = reload(f, env, d.log, d.sched, d.cfg)
			d.reloads.record(d.cfg != prev, problems, time.Now())
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
