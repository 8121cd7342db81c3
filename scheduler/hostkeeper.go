package scheduler

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/hosts"
)

// The host room's state in the store (contract 13.5): what each host
// learned, its throttling and its breaker are written once a second when
// they changed (hosts.Table.Snapshot's dirty set), read at start, and on a
// cluster read again every second, so that every member starts from the
// same limits and sees a host another member opened or throttled
// (hosts.Table.Restore keeps the newer of the stored and its own).

// hostKeepEvery is how often the host room's changes are written (and, on
// a cluster, the others' read).
const hostKeepEvery = time.Second

// loadHosts reads the stored host states; an error is logged and reads as
// none (the hosts start from nothing: a learned limit is an optimisation,
// a breaker or a throttle is relearned from the next answers).
func (t hostsRoom) loadHosts() []hosts.Persisted {
	if !t.cfg.Hosts.Present {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs, err := t.store.LoadHosts(ctx)
	if err != nil {
		t.log.Warn("hosts: stored state not read; starting from none", "err", err)
		return nil
	}
	return decodeHosts(t.log, hs)
}

// decodeHosts decodes stored host states, skipping (and logging) those it
// cannot read.
func decodeHosts(log *slog.Logger, hs []domain.HostState) []hosts.Persisted {
	out := make([]hosts.Persisted, 0, len(hs))
	for _, h := range hs {
		var p hosts.Persisted
		if err := json.Unmarshal(h.Data, &p); err != nil {
			log.Warn("hosts: a stored host state is not readable; ignored", "host", h.Host, "err", err)
			continue
		}
		p.Host = h.Host
		out = append(out, p)
	}
	return out
}

// start readies the host room at the scheduler's start: its groups'
// admitters run under ctx, its hosts are the configuration's, with the
// stored states ps. mu held.
func (t hostsRoom) start(ctx spawnCtx, ps []hosts.Persisted, now time.Time) {
	t.hs.ctx = ctx
	t.configureHosts(t.cfg, ctx)
	t.restoreHosts(ps, now)
}

// restoreHosts adopts stored host states. mu held.
func (t hostsRoom) restoreHosts(ps []hosts.Persisted, now time.Time) {
	if len(ps) == 0 {
		return
	}
	t.hs.hosts.Restore(ps, now)
	for _, p := range ps {
		t.applyHostLimit(p.Host)
	}
}

// keepHosts writes the host room's changes every hostKeepEvery until ctx
// ends, then once more; on a cluster it reads the others' each time too.
func (t hostsRoom) keepHosts(ctx context.Context) {
	tm := t.clock.NewTimer(hostKeepEvery)
	defer tm.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			t.saveHosts(final)
			cancel()
			return
		case <-tm.C():
		}
		t.saveHosts(ctx)
		if t.shards.Member() && len(t.hs.hosts.Hosts()) > 0 {
			t.readHosts(ctx)
		}
		tm.Reset(hostKeepEvery)
	}
}

// saveHosts writes the hosts whose state changed since the last write; on
// a failure they are marked again, for the next.
func (t hostsRoom) saveHosts(ctx context.Context) {
	ps := t.hs.hosts.Snapshot()
	if len(ps) == 0 {
		return
	}
	hs := make([]domain.HostState, 0, len(ps))
	for _, p := range ps {
		data, err := json.Marshal(p)
		if err != nil {
			continue // plain fields: cannot happen
		}
		hs = append(hs, domain.HostState{Host: p.Host, Data: data, UpdatedAt: t.clock.Now()})
	}
	if err := t.store.SaveHosts(ctx, hs); err != nil {
		t.log.Warn("hosts: state not written; retried", "hosts", len(hs), "err", err)
		t.hs.hosts.Unsaved(ps)
	}
}

// readHosts adopts what the cluster's other members wrote.
func (t hostsRoom) readHosts(ctx context.Context) {
	hs, err := t.store.LoadHosts(ctx)
	if err != nil {
		return // the store's outage shows elsewhere; try again next time
	}
	ps := decodeHosts(t.log, hs)
	t.mu.Lock()
	defer t.unlock()
	t.restoreHosts(ps, t.clock.Now())
}

// OfflineHosts is the host room of cfg as the store holds it, for the
// commands that read the store without a daemon (pacer hosts, pacer
// status): cfg's hosts with the stored throttling, breakers and learned
// limits. Polls in flight are unknown there (0).
func OfflineHosts(cfg *config.Config, stored []domain.HostState, log *slog.Logger) *hosts.Table {
	tab := hosts.New()
	if !cfg.Hosts.Present {
		return tab
	}
	tab.Configure(hostsOf(cfg))
	tab.Restore(decodeHosts(log, stored), time.Time{})
	return tab
}
