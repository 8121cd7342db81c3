package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/cluster"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

// member is this daemon's part in a cluster (contract section 8): the
// cluster.Member that claims its shards, and what the admin API and the
// metrics show of the cluster.
type member struct {
	m     *cluster.Member
	clock scheduler.Clock // SteadyClock: the offset is measured against it, the scheduler runs on it
	st    *store.Store
	lease time.Duration
	stop  context.CancelFunc
	done  chan struct{}
}

var _ admin.ClusterView = (*member)(nil)

// newMember makes this daemon a member of the cluster of cfg on st. The
// scheduler is read through sched once it exists (the member starts after
// it, in start).
func newMember(cfg *config.Config, st *store.Store, log *slog.Logger, sched **scheduler.Scheduler) (*member, error) {
	clock := scheduler.SteadyClock(scheduler.RealClock{})
	m, err := cluster.New(st, cluster.Options{
		Clock:       clock,
		Name:        cfg.Cluster.MemberName(),
		Lease:       cfg.Cluster.Lease,
		Fingerprint: sourcesFingerprint(cfg),
		Drained:     func(shard int) bool { return (*sched).Drained(shard) },
		Stats:       func() (int, int) { return (*sched).ClusterStats() },
		Logger:      log,

		// The scheduler's shards (domain.ShardOf with the limits group).
		ShardSources: shardSources(cfg),
	})
	if err != nil {
		return nil, err
	}
	return &member{m: m, clock: clock, st: st, lease: cfg.Cluster.Lease}, nil
}

// start runs the member until stopAfter (its context outlives the
// scheduler: the member gives its shards back once the polls have ended).
func (mb *member) start() {
	ctx, cancel := context.WithCancel(context.Background())
	mb.stop, mb.done = cancel, make(chan struct{})
	go func() {
		defer close(mb.done)
		mb.m.Run(ctx)
	}()
}

// leave stops the member: it leaves the cluster, giving its shards back.
// Called after the scheduler's Shutdown.
func (mb *member) leave() {
	if mb.stop == nil {
		return
	}
	mb.stop()
	<-mb.done
}

// ClusterMembers lists the live members (GET /api/cluster).
func (mb *member) ClusterMembers(ctx context.Context) ([]domain.Member, error) {
	return mb.st.Members(ctx, mb.lease)
}

// register adds the cluster's metrics to reg.
func (mb *member) register(reg prometheus.Registerer, sched *scheduler.Scheduler) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pacer_cluster_members", Help: "Live members of the cluster, as this member saw them at its last round."},
			func() float64 { return float64(mb.m.Live()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pacer_owned_sources", Help: "Sources this member owns and polls."},
			func() float64 { owned, _ := sched.ClusterStats(); return float64(owned) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// sourcesFingerprint identifies the sources config of cfg: members that
// show different ones are warned about (rule 8.6).
func sourcesFingerprint(cfg *config.Config) string {
	lines := make([]string, 0, len(cfg.Sources))
	for i := range cfg.Sources {
		lines = append(lines, cfg.Sources[i].Name+"\x00"+cfg.Sources[i].Fingerprint)
	}
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// shardSources counts the sources of cfg on each shard, as the scheduler
// places them: a shard goes to a member that has its sources (rule 8.1).
func shardSources(cfg *config.Config) map[int]int {
	out := map[int]int{}
	for i := range cfg.Sources {
		out[domain.ShardOf(cfg.Sources[i].Name, cfg.Sources[i].Limit)]++
	}
	return out
}

// setSources tells the cluster what the member's sources config is after
// a reload: its shards' counts, then its fingerprint.
func (mb *member) setSources(cfg *config.Config) {
	mb.m.SetShardSources(shardSources(cfg))
	mb.m.SetFingerprint(sourcesFingerprint(cfg))
}

// shardOwners are the owners of a cluster's shards as status shows them;
// nil when the config has no cluster section.
type shardOwners map[int]string

// clusterOwners reads the owners of the shards of cfg's cluster (nil when
// it has none, or no store yet).
func clusterOwners(cfg *config.Config) (shardOwners, error) {
	if !cfg.Cluster.Set || store.Missing(cfg.Store) {
		return nil, nil
	}
	st, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	owners, err := st.ShardOwners(ctx)
	if err != nil {
		return nil, err
	}
	if owners == nil {
		owners = map[int]string{}
	}
	return owners, nil
}

// of is the owner of src (nil: none, or not a cluster).
func (o shardOwners) of(src *config.Source) *string {
	if name, ok := o[domain.ShardOf(src.Name, src.Limit)]; ok {
		return &name
	}
	return nil
}

// print prints the status table, with the owner column on a cluster.
func (o shardOwners) print(w io.Writer, objs []view.Explained, now time.Time) {
	statusTable(w, objs, now, o != nil)
}

// memberLockTries bound how long a starting member waits for the shared
// lock while another member's start holds the exclusive one for a moment
// (its preload); a daemon without a cluster section keeps it for good.
const (
	memberLockTries = 10
	memberLockPause = 300 * time.Millisecond
)

// memberLock takes the store's shared lock (store.AcquireMemberLock).
func memberLock(dsn string) (*store.Lock, error) {
	var err error
	for range memberLockTries {
		var lock *store.Lock
		if lock, err = store.AcquireMemberLock(dsn); err == nil {
			return lock, nil
		}
		var locked *store.LockedError
		if !errors.As(err, &locked) {
			return nil, err
		}
		time.Sleep(memberLockPause)
	}
	return nil, fmt.Errorf("a daemon that is not a member of the cluster runs on this store: %w", err)
}
