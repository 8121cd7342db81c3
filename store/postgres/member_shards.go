package postgres

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// What each member of a cluster has in its sources config, shard by shard
// (contract 8.1: a source that some live member has in its config is
// owned, and polled, by a member that has it). Members whose configs
// differ (their fingerprints do) read these counts and give each shard to
// the members with the most sources on it, so that a source added to one
// member's config first is polled by that member, and one removed from a
// member's config first goes on being polled by a member that still has it.
//
//   - cluster_member_shards: per member and shard, the number of its
//     configured sources on the shard (none: no row). Written when the
//     member's config changes, read only while the live members' configs
//     differ.

// tableMemberShards is the table of memberShardModel.
const tableMemberShards = "cluster_member_shards"

// memberShardModel is a row of cluster_member_shards.
type memberShardModel struct {
	Member  string `gorm:"primaryKey"`
	Shard   int64  `gorm:"primaryKey;autoIncrement:false"`
	Sources int64  `gorm:"not null"`
}

// TableName pins the table of memberShardModel.
func (memberShardModel) TableName() string { return tableMemberShards }

// PublishShardSources records, for member, how many of its configured
// sources lie on each shard (counts, by shard; shards it has none on may
// be left out), replacing what it recorded before. It also forgets the
// counts of the members that are no longer in cluster_members (forgotten
// after 10 leases of silence, or left), so that the table holds only
// the members the cluster knows and the one publishing.
func (s *Store) PublishShardSources(ctx context.Context, member string, counts map[int]int) error {
	rows := make([]memberShardModel, 0, len(counts))
	for sh, n := range counts {
		if n > 0 {
			rows = append(rows, memberShardModel{Member: member, Shard: int64(sh), Sources: int64(n)})
		}
	}
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("DELETE FROM "+tableMemberShards+" WHERE member = ? OR member NOT IN (SELECT name FROM "+tableMembers+")",
			member).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		return tx.CreateInBatches(rows, 1000).Error
	})
	if err != nil {
		return fmt.Errorf("store: shard sources of %q: %w", member, err)
	}
	return nil
}

// ShardSources returns, for each of members that published its counts
// (PublishShardSources), the number of its configured sources on each
// shard (a shard missing: none).
func (s *Store) ShardSources(ctx context.Context, members []string) (map[string]map[int]int, error) {
	var rows []memberShardModel
	if err := s.DB.WithContext(ctx).Where("member IN ?", members).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: shard sources: %w", err)
	}
	out := make(map[string]map[int]int, len(members))
	for _, r := range rows {
		if out[r.Member] == nil {
			out[r.Member] = map[int]int{}
		}
		out[r.Member][int(r.Shard)] = int(r.Sources)
	}
	return out, nil
}
