// Package notify delivers the notification events of the store's outbox
// (contract 10.1 to 10.3) to the command and webhook of the notify
// section: at least once, in order per source, at most maxInFlight at a
// time, each within notify.timeout, retried with backoff until
// notify.max_age. It never touches a source: a target that hangs or fails
// delays nothing but its own events.
package notify

import (
	"context"
	"errors"
	"fmt"
	"github.com/pacer-dev/pacer/internal/clock"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/lifecycle"
	"github.com/pacer-dev/pacer/internal/ratelog"
	"github.com/pacer-dev/pacer/store"
)

// maxInFlight is how many deliveries run at once (a fixed pool of workers).
const maxInFlight = 4

// retryBackoff is the backoff of a failed event (contract 10.3): 1 s after
// the first failure, doubling to 5 m, without jitter.
func retryBackoff() breaker.Backoff {
	return breaker.Backoff{Initial: time.Second, Max: 5 * time.Minute, Multiplier: 2}
}

// claimMargin is added to the timeout of an event's deliveries for its
// claim, so that the claim outlives them.
const claimMargin = 5 * time.Second

// maxPerSource bounds a source's events in the outbox: past it, its oldest
// are dropped (logged, counted as dropped), so that a receiver down while
// sources flap does not grow the outbox without bound until max_age. It is
// the scheduler's bound on the events a source holds through a store
// outage (scheduler/flush's maxSlotEvents), for the same reason: the
// newest events tell the state a source is in now.
const maxPerSource = 64

// trimLogEvery is the least time between two log lines about events
// dropped by maxPerSource: a receiver down while sources flap drops some
// on every pass.
const trimLogEvery = time.Minute

// DefaultInterval is how often the outbox is read when nothing wakes the
// sender.
const DefaultInterval = 500 * time.Millisecond

// Outbox is what the sender needs of the store.
type Outbox interface {
	ClaimEvents(ctx context.Context, c domain.EventClaim) ([]domain.Event, error)
	EventSent(ctx context.Context, id string) error
	EventFailed(ctx context.Context, id string, next time.Time) error
	DropEvents(ctx context.Context, before, now time.Time) ([]domain.Event, error)
	TrimEvents(ctx context.Context, keep int, now time.Time) ([]domain.Event, error)
	PendingEvents(ctx context.Context) (int, error)
	RetryEventsNow(ctx context.Context, now time.Time, releaseClaims bool) (int64, error)
}

var _ Outbox = (*store.Store)(nil)

// Clock is the sender's time: Now for the backoff, max_age and claims,
// NewTimer for its interval and Stop's deadline. The daemon passes the
// clock its scheduler runs on (one clock for all); tests pass one moved by
// hand.
type Clock = clock.Clock

// Options are a sender's collaborators. Outbox and Registry are required.
type Options struct {
	Outbox   Outbox
	Logger   *slog.Logger          // nil: discard
	Registry prometheus.Registerer // pacer_notifications_total, pacer_notifications_pending
	// Member names this sender's claims (a cluster member's name).
	Member string
	// Sole says that this sender is the only one on its store (a daemon
	// on SQLite): the claims it finds at start are a killed daemon's, and
	// are released at once instead of holding their events for the
	// claim's length (notify.timeout + 5 s).
	Sole bool
	// Interval is how often the outbox is read without a wake-up
	// (default DefaultInterval).
	Interval time.Duration
	// Clock is the sender's time (nil: clock.Real, the wall
	// clock); tests move it by hand.
	Clock Clock
}

// settings is the notify section in force and the redactor of its config.
type settings struct {
	n      *config.Notify
	redact *config.Redactor
}

// Sender is the delivery loop and its pool of workers.
type Sender struct {
	ob       Outbox
	log      *slog.Logger
	member   string
	sole     bool
	interval time.Duration
	clock    Clock
	client   *http.Client
	cur      atomic.Pointer[settings]
	wake     chan struct{}
	jobs     chan job
	free     chan struct{} // a token per idle worker
	metrics  metrics
	// passes counts the loop's readings of the outbox (tests wait on it).
	passes atomic.Int64
	// trimLog rate-limits the lines about the events dropped by
	// maxPerSource and counts those not logged (the loop's alone).
	trimLog ratelog.Limiter

	// run is the loop and the workers; ctx is its context.
	run lifecycle.Stage
	ctx context.Context
}

// metrics are a sender's collectors: pacer_notifications_total's
// children by outcome (resolved once) and pacer_notifications_pending.
type metrics struct {
	sent, failed, dropped prometheus.Counter
	pending               prometheus.Gauge
}

// newMetrics registers the sender's collectors on reg.
func newMetrics(reg prometheus.Registerer) (metrics, error) {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pacer_notifications_total", Help: "Notification deliveries by outcome: sent, failed (to be retried), dropped (older than notify.max_age).",
	}, []string{"outcome"})
	pending := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pacer_notifications_pending", Help: "Notification events in the outbox, not yet delivered.",
	})
	for _, c := range []prometheus.Collector{total, pending} {
		if err := reg.Register(c); err != nil {
			return metrics{}, fmt.Errorf("notify: metrics: %w", err)
		}
	}
	return metrics{sent: total.WithLabelValues("sent"), failed: total.WithLabelValues("failed"),
		dropped: total.WithLabelValues("dropped"), pending: pending}, nil
}

// job is one claimed event and the settings it is delivered with.
type job struct {
	ev  domain.Event
	set *settings
}

// New returns a sender for n (nil: it sends nothing until SetConfig gives
// it a section). Call Start to run it.
func New(n *config.Notify, redact *config.Redactor, opts Options) (*Sender, error) {
	if opts.Outbox == nil || opts.Registry == nil {
		return nil, errors.New("notify: Outbox and Registry are required")
	}
	s := &Sender{
		ob: opts.Outbox, log: opts.Logger, member: opts.Member, sole: opts.Sole, interval: opts.Interval, clock: opts.Clock,
		client: newClient(),
		wake:   make(chan struct{}, 1),
		jobs:   make(chan job),
		free:   make(chan struct{}, maxInFlight),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.interval <= 0 {
		s.interval = DefaultInterval
	}
	var err error
	if s.metrics, err = newMetrics(opts.Registry); err != nil {
		return nil, err
	}
	s.SetConfig(n, redact)
	return s, nil
}

// SetConfig replaces the notify section (a reload): the next deliveries go
// to its targets. nil stops sending; the outbox keeps what it holds.
func (s *Sender) SetConfig(n *config.Notify, redact *config.Redactor) {
	if redact == nil {
		redact = config.NewRedactor()
	}
	s.cur.Store(&settings{n: n, redact: redact})
	s.Wake()
}

// CountDropped counts n events dropped before they reached the outbox (the
// scheduler's bound on events held through a long store outage) as
// pacer_notifications_total{outcome="dropped"}.
func (s *Sender) CountDropped(n int) { s.metrics.dropped.Add(float64(n)) }

// Wake makes the loop read the outbox now (after a commit wrote events).
// It never blocks.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start runs the loop and the workers until Stop.
func (s *Sender) Start() {
	s.ctx = s.run.Begin()
	if s.sole {
		if n, err := s.ob.RetryEventsNow(s.ctx, s.clock.Now(), true); err != nil {
			s.storeError("release claims", err)
		} else if n > 0 {
			s.log.Info("notifications of an earlier run due again", "events", n)
		}
	}
	for range maxInFlight {
		s.free <- struct{}{}
		s.run.Spawn(s.worker)
	}
	s.run.Spawn(s.loop)
}

// Stop cancels the deliveries in flight (their events stay in the outbox,
// claimed until their claim runs out) and waits for the goroutines, up to
// timeout; it reports whether they all ended.
func (s *Sender) Stop(timeout time.Duration) bool {
	return s.run.StopBy(s.clock, s.clock.Now().Add(timeout))
}

// loop reads the outbox when woken and every interval (a timer of the
// sender's clock, set again as it fires, as a ticker would be): it drops
// what is too old, claims as many events as workers are idle and hands
// them out, and updates the pending gauge.
func (s *Sender) loop() {
	tick := s.clock.NewTimer(s.interval)
	defer tick.Stop()
	for {
		housekeep := false
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		case <-tick.C():
			tick.Reset(s.interval)
			housekeep = true
		}
		s.pass(housekeep)
		s.passes.Add(1)
	}
}

// pass is one reading of the outbox: with housekeep (once per interval,
// not on every wake-up) it first drops the events past max_age and reads
// the pending count, then it claims. Without a notify section it only
// reads the count: deliveries begun before a reload removed the section
// still complete, and the gauge must follow them to 0.
func (s *Sender) pass(housekeep bool) {
	set := s.cur.Load()
	if set.n == nil {
		if housekeep {
			s.countPending()
		}
		return
	}
	ctx, now := s.ctx, s.clock.Now()
	if housekeep {
		s.housekeep(set, now)
	}
	idle := len(s.free)
	if idle == 0 {
		return
	}
	evs, err := s.ob.ClaimEvents(ctx, domain.EventClaim{Member: s.member, Now: now, Until: now.Add(s.budget(set.n) + claimMargin), Limit: idle})
	if err != nil {
		s.storeError("claim", err)
		return
	}
	for _, ev := range evs {
		select {
		case <-s.free:
		case <-ctx.Done():
			return
		}
		select {
		case s.jobs <- job{ev: ev, set: set}:
		case <-ctx.Done():
			return
		}
	}
}

// housekeep drops the events older than max_age (one log line each) and
// those past maxPerSource of a source (trim), and sets the pending gauge.
func (s *Sender) housekeep(set *settings, now time.Time) {
	ctx := s.ctx
	if dropped, err := s.ob.DropEvents(ctx, now.Add(-set.n.MaxAge), now); err != nil {
		s.storeError("drop", err)
	} else {
		for _, ev := range dropped {
			s.metrics.dropped.Inc()
			s.log.Warn("notification dropped: undelivered past notify.max_age", "source", ev.Source, "event", ev.Event,
				"id", ev.ID, "attempts", ev.Attempts, "max_age", set.n.MaxAge)
		}
	}
	// A source can have more than maxPerSource events only when the
	// outbox has: the trim's scan of the outbox is skipped otherwise.
	if n := s.countPending(); n > maxPerSource && s.trim(now) {
		s.countPending()
	}
}

// countPending sets the pending gauge to the number of events in the
// outbox (contract 10.5: it returns to 0 once every event is delivered or
// dropped). The outbox is counted, not the sender's own work, so that the
// events another member or an earlier run made are in it too.
// It returns the count, -1 when the store failed to give it.
func (s *Sender) countPending() int {
	n, err := s.ob.PendingEvents(s.ctx)
	if err != nil {
		return -1
	}
	s.metrics.pending.Set(float64(n))
	return n
}

// trim drops the oldest events of the sources that have more than
// maxPerSource in the outbox, counts them, and logs at most one line per
// trimLogEvery (the first drop at once, then the number dropped since).
// It reports whether it dropped any.
func (s *Sender) trim(now time.Time) bool {
	dropped, err := s.ob.TrimEvents(s.ctx, maxPerSource, now)
	if err != nil {
		s.storeError("trim", err)
		return false
	}
	if len(dropped) == 0 {
		return false
	}
	s.metrics.dropped.Add(float64(len(dropped)))
	logNow, held := s.trimLog.Allow(now, trimLogEvery, len(dropped))
	if !logNow {
		return true
	}
	first := dropped[0]
	s.log.Warn("notifications dropped: a source has more undelivered events than the outbox keeps per source; its oldest go",
		"dropped", held+len(dropped), "kept_per_source", maxPerSource, "source", first.Source, "event", first.Event, "id", first.ID)
	return true
}

// budget is the longest the deliveries of one event take.
func (s *Sender) budget(n *config.Notify) time.Duration {
	k := 0
	if len(n.Command) > 0 {
		k++
	}
	if n.Webhook != nil {
		k++
	}
	return time.Duration(max(k, 1)) * n.Timeout
}

func (s *Sender) storeError(what string, err error) {
	if s.ctx.Err() == nil {
		s.log.Warn("notify: outbox "+what+" failed", "err", err)
	}
}

// worker delivers the events handed to it, one at a time.
func (s *Sender) worker() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case j := <-s.jobs:
			s.handle(j)
			s.free <- struct{}{}
			s.Wake() // the source's next event may go now
		}
	}
}

// handle delivers one event to every target and records the outcome.
func (s *Sender) handle(j job) {
	err := s.deliver(j)
	if s.ctx.Err() != nil {
		return // stopping: the claim runs out and another pass retries it
	}
	ctx := context.WithoutCancel(s.ctx)
	if err == nil {
		s.metrics.sent.Inc()
		if err := s.ob.EventSent(ctx, j.ev.ID); err != nil {
			s.storeError("sent", err)
		}
		if j.ev.Attempts > 0 {
			// A retry went through: the targets answer again, so the
			// events waiting out their backoff (up to 5 min after a
			// long outage) go now instead, and the outbox drains.
			if _, err := s.ob.RetryEventsNow(ctx, s.clock.Now(), false); err != nil {
				s.storeError("retry now", err)
			}
		}
		return
	}
	s.metrics.failed.Inc()
	attempts := j.ev.Attempts + 1
	next := s.clock.Now().Add(Backoff(attempts))
	if attempts&(attempts-1) == 0 { // the 1st, 2nd, 4th, 8th ... failure
		s.log.Warn("notification delivery failed; retrying", "source", j.ev.Source, "event", j.ev.Event, "id", j.ev.ID,
			"attempts", attempts, "next_attempt_at", next.UTC(), "err", j.set.redact.Redact(err.Error()))
	}
	if err := s.ob.EventFailed(ctx, j.ev.ID, next); err != nil {
		s.storeError("failed", err)
	}
}

// deliver sends ev to the command and the webhook, each within the timeout.
func (s *Sender) deliver(j job) error {
	body, err := Marshal(j.ev)
	if err != nil {
		return err
	}
	n := j.set.n
	var errs []error
	if len(n.Command) > 0 {
		ctx, cancel := context.WithTimeout(s.ctx, n.Timeout)
		errs = append(errs, runCommand(ctx, n.Command, body))
		cancel()
	}
	if n.Webhook != nil {
		ctx, cancel := context.WithTimeout(s.ctx, n.Timeout)
		wb, ctype := s.webhookBody(j, body)
		errs = append(errs, postWebhook(ctx, s.client, n.Webhook, j.ev.ID, wb, ctype))
		cancel()
	}
	return errors.Join(errs...)
}

// Backoff is the wait after the k-th consecutive failed delivery of an
// event: 1 s, doubling, at most 5 m.
func Backoff(k int) time.Duration { return retryBackoff().Delay(k, 0) }
