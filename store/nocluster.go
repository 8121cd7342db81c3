package store

import (
	"context"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// noCluster is the cluster of a store that cannot have one (SQLite): every
// call answers ErrNoCluster.
type noCluster struct{}

func (noCluster) Heartbeat(context.Context, domain.Member, time.Duration) ([]domain.Member, error) {
	return nil, ErrNoCluster
}

func (noCluster) DatabaseNow(context.Context) (time.Time, error) { return time.Time{}, ErrNoCluster }

func (noCluster) Members(context.Context, time.Duration) ([]domain.Member, error) {
	return nil, ErrNoCluster
}

func (noCluster) LeaveCluster(context.Context, string) error { return ErrNoCluster }

func (noCluster) ClaimShards(context.Context, string, time.Duration, []int, []int) ([]domain.Claim, error) {
	return nil, ErrNoCluster
}

func (noCluster) SaveBatchFenced(context.Context, domain.Fence, []domain.SourceState, []domain.PollRecord, int) ([]string, error) {
	return nil, ErrNoCluster
}

func (noCluster) CommitFenced(context.Context, domain.Fence, domain.Batch, int) ([]string, error) {
	return nil, ErrNoCluster
}

func (noCluster) ShardOwners(context.Context) (map[int]string, error) { return nil, ErrNoCluster }

func (noCluster) LoadStatesOf(context.Context, []string) ([]domain.SourceState, error) {
	return nil, ErrNoCluster
}

func (noCluster) PublishShardSources(context.Context, string, map[int]int) error { return ErrNoCluster }

func (noCluster) ShardSources(context.Context, []string) (map[string]map[int]int, error) {
	return nil, ErrNoCluster
}
