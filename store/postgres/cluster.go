package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store/internal/sqlcore"
)

// The store's part of a cluster (contract section 8, on PostgreSQL only):
// sources are hashed to Shards shards (the sources of one limits group to
// one shard, so that the group's limits hold on one member), members claim
// shards with leased rows, and every state commit of a member is
// conditional on the fence of its claim, so that a member that lost a
// shard cannot overwrite what its new owner wrote.
//
//   - cluster_members: one row per member, its heartbeat (last_seen_at,
//     from the database's clock) and what /api/cluster shows.
//   - cluster_shards: one row per shard: owner, lease_until (the
//     database's now() + lease at the last claim or renewal) and fence,
//     incremented at every claim.
//
// Leases are measured on the database's clock only; a member turns what
// is left of a lease into a deadline on its own monotonic clock
// (Claim.Left), taken before the statement, so that it errs early.

// Table names of the cluster.
const (
	tableMembers = "cluster_members"
	tableShards  = "cluster_shards"
)

// memberModel is a row of cluster_members.
type memberModel struct {
	Name              string    `gorm:"primaryKey"`
	StartedAt         time.Time `gorm:"not null"`
	LastSeenAt        time.Time `gorm:"not null;index"`
	ConfigFingerprint string    `gorm:"not null;default:('')"`
	OwnedSources      int64     `gorm:"not null;default:0"`
	Inflight          int64     `gorm:"not null;default:0"`
	ClockOffsetMs     int64     `gorm:"not null;default:0"`
}

// TableName pins the table of memberModel.
func (memberModel) TableName() string { return tableMembers }

// shardModel is a row of cluster_shards.
type shardModel struct {
	Shard      int64 `gorm:"primaryKey;autoIncrement:false"`
	Owner      *string
	LeaseUntil *time.Time
	Fence      int64 `gorm:"not null;default:0"`
}

// TableName pins the table of shardModel.
func (shardModel) TableName() string { return tableShards }

// clusterModels are the tables that only a PostgreSQL store has.
func clusterModels() []sqlcore.Model {
	return []sqlcore.Model{{Value: &memberModel{}}, {Value: &shardModel{}}, {Value: &memberShardModel{}}}
}

// createClusterTables creates, within tx, the cluster's tables that are
// missing and the rows of every shard.
func createClusterTables(tx *gorm.DB) error {
	for _, m := range clusterModels() {
		if tx.Migrator().HasTable(m.Value) {
			continue
		}
		if err := tx.Migrator().CreateTable(m.Value); err != nil {
			return fmt.Errorf("create table of %T: %w", m.Value, err)
		}
	}
	if err := addClusterColumns(tx); err != nil {
		return err
	}
	err := tx.Exec("INSERT INTO "+tableShards+" (shard, fence) SELECT s, 0 FROM generate_series(0, ?) AS s "+
		"ON CONFLICT (shard) DO NOTHING", domain.Shards-1).Error
	if err != nil {
		return fmt.Errorf("create shards: %w", err)
	}
	return nil
}

// addClusterColumns adds the columns of the cluster's tables that came
// after them (cluster_members.clock_offset_ms) to a store that lacks them.
// A store that has them is not written.
func addClusterColumns(db *gorm.DB) error {
	if db.Migrator().HasColumn(&memberModel{}, "ClockOffsetMs") {
		return nil
	}
	if err := db.Exec("ALTER TABLE " + tableMembers + " ADD COLUMN IF NOT EXISTS clock_offset_ms bigint NOT NULL DEFAULT 0").Error; err != nil {
		return fmt.Errorf("add column clock_offset_ms of %s: %w", tableMembers, err)
	}
	return nil
}

// Heartbeat records that member m is alive now (the database's clock) with
// what it shows, forgets members silent for more than 10 leases, and
// returns the live members, those seen within lease, by name.
func (s *Store) Heartbeat(ctx context.Context, m domain.Member, lease time.Duration) ([]domain.Member, error) {
	var out []domain.Member
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Exec("INSERT INTO "+tableMembers+" (name, started_at, last_seen_at, config_fingerprint, owned_sources, inflight, clock_offset_ms) "+
			"VALUES (?, ?, now(), ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET last_seen_at = now(), "+
			"config_fingerprint = excluded.config_fingerprint, owned_sources = excluded.owned_sources, inflight = excluded.inflight, "+
			"clock_offset_ms = excluded.clock_offset_ms",
			m.Name, sqlcore.NormTime(m.StartedAt), m.ConfigFingerprint, m.OwnedSources, m.Inflight, m.ClockOffsetMs).Error
		if err != nil {
			return err
		}
		if err := tx.Exec("DELETE FROM "+tableMembers+" WHERE last_seen_at < now() - ? * interval '1 microsecond'",
			(10 * lease).Microseconds()).Error; err != nil {
			return err
		}
		out, err = liveMembers(tx, lease)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: heartbeat of %q: %w", m.Name, err)
	}
	return out, nil
}

// DatabaseNow is the database's clock now (clock_timestamp()): a member
// measures its own clock's offset from it, and schedules on the
// database's clock, so that the due times members hand over through the
// store mean the same to all of them (rule 8.1).
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.SQL.QueryRowContext(ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("store: the database's clock: %w", err)
	}
	return now, nil
}

// Members returns the members seen within lease, by name.
func (s *Store) Members(ctx context.Context, lease time.Duration) ([]domain.Member, error) {
	out, err := liveMembers(s.DB.WithContext(ctx), lease)
	if err != nil {
		return nil, fmt.Errorf("store: members: %w", err)
	}
	return out, nil
}

func liveMembers(db *gorm.DB, lease time.Duration) ([]domain.Member, error) {
	var rows []memberModel
	err := db.Where("last_seen_at > now() - ? * interval '1 microsecond'", lease.Microseconds()).Order("name").Find(&rows).Error
	if err != nil {
		return nil, err
	}
	out := make([]domain.Member, 0, len(rows))
	for _, r := range rows {
		out = append(out, domain.Member{Name: r.Name, StartedAt: sqlcore.NormTime(r.StartedAt), LastSeenAt: sqlcore.NormTime(r.LastSeenAt),
			ConfigFingerprint: r.ConfigFingerprint, OwnedSources: int(r.OwnedSources), Inflight: int(r.Inflight),
			ClockOffsetMs: r.ClockOffsetMs})
	}
	return out, nil
}

// LeaveCluster removes member from the members and gives up its shards
// (a member stopped with SIGTERM, once its polls have ended), so that the
// others claim them at once instead of after their leases.
func (s *Store) LeaveCluster(ctx context.Context, member string) error {
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("UPDATE "+tableShards+" SET owner = NULL, lease_until = NULL WHERE owner = ?", member).Error; err != nil {
			return err
		}
		return tx.Exec("DELETE FROM "+tableMembers+" WHERE name = ?", member).Error
	})
	if err != nil {
		return fmt.Errorf("store: %q leaves the cluster: %w", member, err)
	}
	return nil
}

// ClaimShards is one round of a member's claims, in one transaction: it
// gives up the shards of release that it owns, renews the leases it holds
// (for lease from now), claims the shards of want that nobody holds (free,
// or their lease expired: the fence is incremented unless the expired
// lease was this member's own), and returns every
// claim it holds after that, by shard.
func (s *Store) ClaimShards(ctx context.Context, member string, lease time.Duration, want, release []int) ([]domain.Claim, error) {
	until := "now() + " + fmt.Sprint(lease.Microseconds()) + " * interval '1 microsecond'"
	var out []domain.Claim
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Every row the round may change is locked first, in shard order:
		// a commit's fence check locks its shards in that order too (FOR
		// SHARE, validShards), and the UPDATEs below would otherwise lock
		// theirs in scan order, statement by statement, which deadlocked
		// against a commit of the same member under load (SQLSTATE 40P01,
		// the round and the commit both failing).
		if err := tx.Exec("SELECT shard FROM "+tableShards+" WHERE owner = ? OR shard IN ? ORDER BY shard FOR UPDATE",
			member, append(append([]int{-1}, want...), release...)).Error; err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if len(release) > 0 {
			if err := tx.Exec("UPDATE "+tableShards+" SET owner = NULL, lease_until = NULL WHERE owner = ? AND shard IN ?",
				member, release).Error; err != nil {
				return fmt.Errorf("release: %w", err)
			}
		}
		if err := tx.Exec("UPDATE "+tableShards+" SET lease_until = "+until+" WHERE owner = ? AND lease_until > now()",
			member).Error; err != nil {
			return fmt.Errorf("renew: %w", err)
		}
		if len(want) > 0 {
			// An expired lease of our own is claimed again too. It keeps
			// its fence while the row still names this member (nobody
			// else claimed the shard since: a claim sets the owner, a
			// release clears it), so that the commits the member could
			// not make while it was cut off from the database still go
			// in; any other claim gets a new fence.
			if err := tx.Exec("UPDATE "+tableShards+" SET fence = CASE WHEN owner = ? THEN fence ELSE fence + 1 END, owner = ?, lease_until = "+until+
				" WHERE shard IN ? AND (owner IS NULL OR lease_until IS NULL OR lease_until <= now())", member, member, want).Error; err != nil {
				return fmt.Errorf("claim: %w", err)
			}
		}
		var err error
		out, err = heldClaims(tx, member)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: claims of %q: %w", member, err)
	}
	return out, nil
}

// heldClaims returns, within tx, the claims member holds now, by shard.
func heldClaims(tx *gorm.DB, member string) ([]domain.Claim, error) {
	rows, err := tx.Raw("SELECT shard, fence, (EXTRACT(EPOCH FROM lease_until - now()) * 1000000)::bigint FROM "+tableShards+
		" WHERE owner = ? AND lease_until > now() ORDER BY shard", member).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []domain.Claim
	for rows.Next() {
		var c domain.Claim
		var left int64
		if err := rows.Scan(&c.Shard, &c.Fence, &left); err != nil {
			return nil, err
		}
		c.Left = time.Duration(left) * time.Microsecond
		out = append(out, c)
	}
	return out, rows.Err()
}

// SaveBatchFenced is SaveBatch for a member of a cluster: the states and
// records of a source are written only if the member still holds the
// source's shard with the fence of f (nobody else claimed it since, see
// validShards). The rows of the shards it lost are left out, and their sources returned in rejected, by
// name; the rest is committed, in one transaction as SaveBatch. The shards
// checked stay locked (FOR SHARE) until the commit, so that no claim can
// take one of them in the middle of it.
func (s *Store) SaveBatchFenced(ctx context.Context, f domain.Fence, states []domain.SourceState, records []domain.PollRecord, keep int) (rejected []string, err error) {
	return s.CommitFenced(ctx, f, domain.Batch{States: states, Records: records}, keep)
}

// CommitFenced is Commit for a member of a cluster, fenced as
// SaveBatchFenced: the events of a source whose shard the member lost are
// left out with its state, so that no event is committed without the state
// change that made it.
func (s *Store) CommitFenced(ctx context.Context, f domain.Fence, b domain.Batch, keep int) (rejected []string, err error) {
	if b.Empty() {
		return nil, nil
	}
	check := func(ctx context.Context, tx *sql.Tx, r *sqlcore.BatchRows) error {
		valid, err := validShards(ctx, tx, fenceOnly(f, r))
		if err != nil {
			return err
		}
		lost := map[string]bool{}
		r.Keep(func(name string) bool {
			ok := valid[f.ShardOf(name)]
			if !ok {
				lost[name] = true
			}
			return ok
		})
		for name := range lost {
			rejected = append(rejected, name)
		}
		slices.Sort(rejected)
		return nil
	}
	if err := s.CommitChecked(ctx, b, keep, check); err != nil {
		return nil, err
	}
	return rejected, nil
}

// fenceOnly is f restricted to the shards of the sources of r: a commit
// checks and locks the rows of the shards it writes, not every shard the
// member holds.
func fenceOnly(f domain.Fence, r *sqlcore.BatchRows) domain.Fence {
	out := domain.Fence{Member: f.Member, Fences: make(map[int]int64), ShardOf: f.ShardOf}
	r.EachSource(func(name string) {
		sh := f.ShardOf(name)
		if fe, ok := f.Fences[sh]; ok {
			out.Fences[sh] = fe
		}
	})
	return out
}

// validShards returns the shards of f that the member still holds with
// f's fence, locking their rows until the end of tx. A lease that ran out
// still counts while its row names the member with f's fence: no other
// member claimed the shard since (a claim by another sets the owner and
// increments the fence, a release clears the owner), and none can until
// this commit ends (the rows are locked). The polls a member ran before an
// outage longer than its lease (a lock held on the tables, a restart of
// the server) are then committed once the database answers, instead of
// refused because the lease lapsed while nobody took the shard over (53
// polls lost of 1,700 to a 20 s lock).
func validShards(ctx context.Context, tx *sql.Tx, f domain.Fence) (map[int]bool, error) {
	shards := make([]int64, 0, len(f.Fences))
	fences := make([]int64, 0, len(f.Fences))
	for sh, fe := range f.Fences {
		shards, fences = append(shards, int64(sh)), append(fences, fe)
	}
	rows, err := tx.QueryContext(ctx, "SELECT s.shard FROM "+tableShards+" s JOIN unnest($2::bigint[], $3::bigint[]) AS f(shard, fence) "+
		"ON s.shard = f.shard AND s.fence = f.fence WHERE s.owner = $1 ORDER BY s.shard FOR SHARE OF s",
		f.Member, shards, fences)
	if err != nil {
		return nil, fmt.Errorf("check fences: %w", err)
	}
	defer rows.Close()
	valid := make(map[int]bool, len(shards))
	for rows.Next() {
		var sh int
		if err := rows.Scan(&sh); err != nil {
			return nil, fmt.Errorf("check fences: %w", err)
		}
		valid[sh] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check fences: %w", err)
	}
	return valid, nil
}

// ShardOwners returns the owner of every shard whose lease holds now (the
// source object's owner field: the owner of the source's shard; a shard
// missing from the map has none).
func (s *Store) ShardOwners(ctx context.Context) (map[int]string, error) {
	var rows []shardModel
	if err := s.DB.WithContext(ctx).Where("owner IS NOT NULL AND lease_until > now()").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: shard owners: %w", err)
	}
	out := make(map[int]string, len(rows))
	for _, r := range rows {
		out[int(r.Shard)] = *r.Owner
	}
	return out, nil
}

// LoadStatesOf returns the stored states of the sources named (those that
// have one), in the order of the table: what a member reads of the shards
// it has just claimed, as their previous owner left them.
func (s *Store) LoadStatesOf(ctx context.Context, names []string) ([]domain.SourceState, error) {
	keys := make([]int64, len(names))
	for i, n := range names {
		keys[i] = sqlcore.Skey(n)
	}
	return s.QueryStates(ctx, "WHERE (skey, name) IN (SELECT * FROM unnest($1::bigint[], $2::text[])) ORDER BY skey, name", keys, names)
}
