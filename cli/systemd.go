package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/deliver"
)

// Descriptor budget (contract section 7): each poll in flight may hold up
// to fdsPerPoll descriptors (an exec poll: stdout and stderr pipes, stdin,
// a pidfd; an http poll: its connection plus an idle one in the pool; the
// connections of every client setting share that budget, see
// sources.Transports), plus what its delivery holds (pollFDs), and
// fdHeadroom are kept for the store, the admin API and its clients.
const (
	fdsPerPoll = 4
	fdHeadroom = 64
	// adminConns caps the admin listener's open connections at a fixed
	// share of the headroom (half of it, at most 64), so that clients of
	// the admin port, idle keep-alives included, cannot take the
	// descriptors of polls or of the store.
	adminConns = min(64, fdHeadroom/2)
)

// fdCap returns the largest concurrency that fits under a soft descriptor
// limit of soft with perPoll descriptors a poll, at least 1.
func fdCap(soft uint64, perPoll int) int {
	perPoll = max(perPoll, 1)
	if soft <= fdHeadroom+uint64(perPoll) {
		return 1
	}
	n := (soft - fdHeadroom) / uint64(perPoll)
	if n > 1<<20 {
		n = 1 << 20
	}
	return int(n)
}

// pollFDs returns how many descriptors one poll of cfg may hold:
// fdsPerPoll, plus what the costliest delivery of its sources adds (its
// spool file, a command's pipes while it starts: deliver.Descriptors).
// Before, deliveries were left out: 48 polls each starting a delivery
// command took all 256 descriptors (issue 20 item 12).
func pollFDs(cfg *config.Config) int {
	extra := 0
	for _, src := range cfg.Sources {
		if src.Deliver != nil {
			extra = max(extra, deliver.Descriptors(src.Deliver))
		}
	}
	return fdsPerPoll + extra
}

// raiseNofile raises the soft RLIMIT_NOFILE to the hard limit (the Go
// runtime does so too since 1.19; doing it here makes it explicit) and
// returns the soft limit in force.
func raiseNofile() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err == nil {
			lim = want
		}
	}
	return lim.Cur, nil
}

// descriptorCap returns the highest concurrency the descriptor limit
// allows for cfg (0: unknown, no cap), logging both numbers when the
// configured cap does not fit, and the function that computes it for a
// configuration (nil when unknown), which the scheduler applies on every
// reload too.
func descriptorCap(cfg *config.Config, log *slog.Logger) (int, func(*config.Config) int) {
	soft, err := raiseNofile()
	if err != nil {
		log.Warn("cannot read the descriptor limit; using the configured concurrency", "err", err)
		return 0, nil
	}
	capOf := func(c *config.Config) int { return fdCap(soft, pollFDs(c)) }
	limit := capOf(cfg)
	if cfg.Concurrency > limit {
		log.Warn("concurrency lowered to fit the descriptor limit", "configured", cfg.Concurrency,
			"effective", limit, "rlimit_nofile", soft, "fds_per_poll", pollFDs(cfg), "headroom", fdHeadroom)
	}
	return limit, capOf
}

// notifier sends systemd notifications; with no NOTIFY_SOCKET it does
// nothing. It is a field so that tests can record what would be sent.
type notifier func(state string)

func sdNotify(state string) {
	_, _ = daemon.SdNotify(false, state) // best effort: systemd may be gone
}

// watchdogInterval is WATCHDOG_USEC when the watchdog is enabled for this
// process (WATCHDOG_PID unset or ours), else 0.
func watchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0
	}
	return d
}

// supervise sends WATCHDOG=1 every interval/2 while healthy says all is well
// (the scheduler loop makes progress and the store answers), and a STATUS=
// line every statusEvery. A stuck loop or a dead store stops the pings, so
// systemd restarts the service. It returns when ctx is done.
func supervise(ctx context.Context, interval, statusEvery time.Duration, healthy func(context.Context) error,
	status func() string, notify notifier, log *slog.Logger) {
	tick := statusEvery
	if interval > 0 {
		tick = min(tick, interval/2)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	lastStatus := time.Time{}
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if interval > 0 {
			cctx, cancel := context.WithTimeout(ctx, interval/4)
			err := healthy(cctx)
			cancel()
			if err == nil {
				notify("WATCHDOG=1")
				if lastErr != "" {
					log.Info("watchdog: healthy again")
					lastErr = ""
				}
			} else if err.Error() != lastErr {
				lastErr = err.Error()
				log.Error("watchdog: withholding keep-alive", "err", err)
			}
		}
		if time.Since(lastStatus) >= statusEvery {
			notify("STATUS=" + status())
			lastStatus = time.Now()
		}
	}
}

// statusLine is the short STATUS= line: "polling 1,204 sources, 12 in
// flight, 3 in error".
func statusLine(sources, inflight, errored int) string {
	return fmt.Sprintf("polling %s sources, %d in flight, %d in error", thousands(sources), inflight, errored)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, for RELOADING=1.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano() / 1000
}
