package sqlite

import (
	"context"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store/internal/sqlcore"
)

// noCluster is the cluster of a store that cannot have one (SQLite): every
// call answers sqlcore.ErrNoCluster.
type noCluster struct{}

func (noCluster) Heartbeat(context.Context, domain.Member, time.Duration) ([]domain.Member, error) {
	return nil, sqlcore.ErrNoCluster
}

func (noCluster) DatabaseNow(context.Context) (time.Time, error) {
	return time.Time{}, sqlcore.ErrNoCluster
}

func (noCluster) Members(context.Context, time.Duration) ([]domain.Member, error) {
	return nil, sqlcore.ErrNoCluster
}

func (noCluster) LeaveCluster(context.Context, string) error { return sqlcore.ErrNoCluster }

func (noCluster) ClaimShards(context.Context, string, time.Duration, []int, []int) ([]domain.Claim, error) {
	return nil, sqlcore.ErrNoCluster
}

func (noCluster) SaveBatchFenced(context.Context, domain.Fence, []domain.SourceState, []domain.PollRecord, int) ([]string, error) {
	return nil, sqlcore.ErrNoCluster
}

func (noCluster) CommitFenced(context.Context, domain.Fence, domain.Batch, int) ([]string, error) {
	return nil, sqlcore.ErrNoCluster
}

func (noCluster) ShardOwners(context.Context) (map[int]string, error) {
	return nil, sqlcore.ErrNoCluster
}

func (noCluster) LoadStatesOf(context.Context, []string) ([]domain.SourceState, error) {
	return nil, sqlcore.ErrNoCluster
}

func (noCluster) PublishShardSources(context.Context, string, map[int]int) error {
	return sqlcore.ErrNoCluster
}

func (noCluster) ShardSources(context.Context, []string) (map[string]map[int]int, error) {
	return nil, sqlcore.ErrNoCluster
}
