package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/hosts"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/queue"
	ups "github.com/pacer-dev/pacer/upstream"
)

// The scheduler's side of contract section 13: the host room
// (hosts.Table, its own lock, taken after mu) answers whether a source's
// host lets it start and learns from each finished poll; the queue room
// holds one host group per host with a cap or a rate (the configured or
// the learned one), through which the host's jobs pass before the global
// queue. Without a hosts section the table knows no host, no job has a
// host group, and nothing here runs on the poll path.

// hostState is what the table keeps for contract section 13, guarded by
// mu: the host room (its own lock, taken after mu), where its groups'
// admitters run, the member's share of each host's sources (hostshare.go;
// nil on a single daemon) and the sources blocked at their last due time
// (blocks.go; nil until the first).
type hostState struct {
	hosts  *hosts.Table
	ctx    spawnCtx
	share  map[string]float64
	blocks map[*entry]block
}

// hostsRoom is the table seen as its hosts-and-dependencies part: the
// methods of blocks.go, upstreams.go, hostkeeper.go and hostshare.go,
// apart from the table's own so that each type stays small. Under mu,
// like the table's.
type hostsRoom struct{ *table }

// up is the table's hosts-and-dependencies part.
func (t *table) up() hostsRoom { return hostsRoom{t} }

// hostSettings converts the configuration's settings of a host.
func hostSettings(s config.HostSettings) hosts.Settings {
	b := s.Breaker
	return hosts.Settings{Concurrency: s.Concurrency, Rate: s.Rate, Burst: s.Burst, Adaptive: s.Adaptive,
		Breaker: hosts.BreakerPolicy{Sources: b.Sources, Failures: b.Failures, Window: b.Window, Cooldown: b.Cooldown}}
}

// configureHosts gives the host room cfg's hosts (their settings and
// numbers of sources) and the queue room a group per host with a limit.
// mu held (started) or before Start.
func (t hostsRoom) configureHosts(cfg *config.Config, ctx spawnCtx) {
	if !cfg.Hosts.Present {
		t.hs.hosts.Configure(nil, nil)
		t.q.SetHosts(ctx.ctx, nil, ctx.spawn)
		return
	}
	settings, counts := hostsOf(cfg)
	t.hs.hosts.Configure(settings, counts)
	t.q.SetHosts(ctx.ctx, t.hostLimits(counts), ctx.spawn)
	t.shareHosts()
}

// hostsOf is the settings and the number of sources of each of cfg's
// hosts.
func hostsOf(cfg *config.Config) (map[string]hosts.Settings, map[string]int) {
	counts := map[string]int{}
	for _, s := range cfg.Sources {
		if s.Host != "" {
			counts[s.Host]++
		}
	}
	settings := make(map[string]hosts.Settings, len(counts))
	for h := range counts {
		settings[h] = hostSettings(cfg.Hosts.For(h))
	}
	return settings, counts
}

// hostLimits is the limit of the group of each host of counts that has a
// cap or a rate now (configured or learned).
func (t hostsRoom) hostLimits(counts map[string]int) map[string]config.Limit {
	out := map[string]config.Limit{}
	for h := range counts {
		if l, ok := t.hostLimit(h); ok {
			out[h] = l
		}
	}
	return out
}

// hostLimit is host's group limit now, false for none.
func (t hostsRoom) hostLimit(host string) (config.Limit, bool) {
	c, r, b := t.hs.hosts.Limits(host)
	if c <= 0 && r <= 0 {
		return config.Limit{}, false
	}
	return config.Limit{Concurrency: c, Rate: r, Burst: max(b, 1)}, true
}

// spawnCtx is where the host groups' admitters run: the dispatching
// stage's context and spawn.
type spawnCtx struct {
	ctx   context.Context
	spawn queue.Spawn
}

// hostBlock is the block of e by its host (contract 13.2, 13.3), or the
// zero block. start: the poll is about to start (hosts.Table.Admit, which
// counts it and may make it the breaker's probe); else a look
// (hosts.Table.Peek). mu held.
func (t hostsRoom) hostBlock(e *entry, now time.Time, start bool) block {
	if e.src.Host == "" || !t.cfg.Hosts.Present {
		return block{}
	}
	var g hosts.Gate
	if start {
		g = t.hs.hosts.Admit(e.src.Host, e.name, now)
	} else {
		g = t.hs.hosts.Peek(e.src.Host, now)
	}
	if !g.Blocked {
		return block{}
	}
	return block{kind: blockHost, reason: g.Reason, until: g.Until}
}

// hostRoute is the host group of e's jobs, or nil. mu held.
func (t hostsRoom) hostRoute(e *entry) *queue.Group[*entry] {
	if e.src.Host == "" || !t.cfg.Hosts.Present {
		return nil
	}
	return t.q.Host(e.src.Host)
}

// hostOutcome is what the host room learns of a finished poll p of j,
// with o its classified outcome and next the source's next run as rule
// 3.5 set it (the throttling's end for a throttled answer).
func hostOutcome(j queue.Job[*entry], p *pollResult, o *policy.Outcome, next time.Time) hosts.Outcome {
	res := &p.res
	out := hosts.Outcome{
		Source: j.Name, Latency: p.end.Sub(p.start), Success: o.Kind == domain.OutcomeSuccess,
		Waited: j.HostWaited, Inflight: j.HostInflight,
	}
	switch {
	case o.Kind == domain.OutcomeFailure && res.StatusCode == 0 && ups.ConnectionLevel(res.Err):
		out.ConnFailure, out.Detail = true, connDetail(res.Err)
	case res.Throttled:
		out.Throttled, out.ThrottledUntil, out.Detail = true, next, o.Err
	case res.Answer != nil:
		if until, ok := ups.QuotaUntil(res.Answer.Header, p.end); ok {
			out.Throttled, out.ThrottledUntil, out.Detail = true, until, "quota spent"
		}
	}
	return out
}

// connDetail is a short text of a connection-level failure for a host's
// reason: the innermost error's text (no URL, so no secret).
func connDetail(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// finishHost tells the host room how j's poll ended, applies the host's
// learned limits to its group, and returns the host events to commit with
// the source's state. mu held.
func (t hostsRoom) finishHost(j queue.Job[*entry], p *pollResult, o *policy.Outcome, next time.Time) []domain.Event {
	e := j.Source
	if e.src.Host == "" || !t.cfg.Hosts.Present || o.Kind == policy.KindRejected {
		return nil
	}
	h := e.src.Host
	if o.Kind == domain.OutcomeInterrupted || o.Kind == policy.KindLocal {
		t.hs.hosts.Abandon(h, j.Name, o.End)
		return nil
	}
	evs := t.hs.hosts.Finish(h, hostOutcome(j, p, o, next), o.End)
	if !t.cfg.Hosts.For(h).Adaptive {
		return t.hostEvents(evs) // its limits change only with the configuration
	}
	// An adaptive host has had its group since configureHosts (its
	// learned concurrency is never below 1): set its limit in place.
	t.applyHostLimit(h)
	return t.hostEvents(evs)
}

// hostEvents turns the host room's events into the outbox's, those that
// notify.on wants (contract 13.7).
func (t hostsRoom) hostEvents(evs []hosts.Event) []domain.Event {
	n := t.cfg.Notify
	if n == nil || len(evs) == 0 {
		return nil
	}
	out := make([]domain.Event, 0, len(evs))
	for _, ev := range evs {
		if !n.Wants(ev.Kind) {
			continue
		}
		state := hosts.StateOpen
		if ev.Kind == hosts.EventRecovered {
			state = hosts.StateClosed
		}
		out = append(out, domain.Event{ID: domain.NewEventID(), Host: ev.Host, Sources: ev.Sources, Event: ev.Kind,
			State: state, Reason: ev.Reason, At: ev.At.UTC()})
	}
	return out
}

// hostObjects is Scheduler.Hosts: every host's object with its polls in
// flight.
func (t hostsRoom) hostObjects() []hosts.Object {
	t.mu.Lock()
	defer t.unlock()
	objs := t.hs.hosts.Objects(t.clock.Now())
	for i := range objs {
		if g := t.q.Host(objs[i].Host); g != nil {
			objs[i].Inflight = g.Held()
		}
	}
	return objs
}

// hostObject is Scheduler.Host.
func (t hostsRoom) hostObject(name string, reset bool) (hosts.Object, error) {
	t.mu.Lock()
	defer t.unlock()
	now := t.clock.Now()
	var o hosts.Object
	var ok bool
	if reset {
		o, ok = t.hs.hosts.Reset(name, now)
		if ok {
			t.applyHostLimit(name)
		}
	} else {
		o, ok = t.hs.hosts.Object(name, now)
	}
	if !ok {
		return hosts.Object{}, fmt.Errorf("%w: host %q", ErrNotFound, name)
	}
	if g := t.q.Host(name); g != nil {
		o.Inflight = g.Held()
	}
	return o, nil
}

// nextRun is st's next run, or the zero time.
func nextRun(st *domain.SourceState) time.Time {
	if st.NextRunAt == nil {
		return time.Time{}
	}
	return *st.NextRunAt
}

// respectCache defers e's next poll to the end of the answer's cache
// lifetime (contract 13.6: Cache-Control max-age or Expires, at most 24 h,
// never earlier than its schedule) after a success of a source with
// respect_cache. mu held.
func (t hostsRoom) respectCache(e *entry, p *pollResult, o *policy.Outcome) {
	if !e.src.RespectCache || o.Kind != domain.OutcomeSuccess || p.res.Answer == nil {
		return
	}
	until, ok := ups.CacheUntil(p.res.Answer.Header, o.End)
	if !ok || !until.After(nextRun(&e.st)) {
		return
	}
	e.st.NextRunAt = policy.UTCPtr(policy.CeilMicro(until))
}
