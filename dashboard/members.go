package dashboard

import (
	"context"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// ClusterView lists the live members of the cluster this daemon belongs
// to (contract 11.1: the overview shows them on a cluster). The daemon
// passes its cluster member; nil on a single daemon.
type ClusterView interface {
	ClusterMembers(ctx context.Context) ([]domain.Member, error)
}

// memberView is a member as the overview shows it.
type memberView struct {
	Name         string
	OwnedSources int
	Inflight     int
	LastSeen     *time.Time
}

// members reads the cluster's members for the overview: nil without a
// cluster, and the error's text when the store does not answer in time.
func (d *Dashboard) members(ctx context.Context) ([]memberView, string) {
	if d.cluster == nil {
		return nil, ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ms, err := d.cluster.ClusterMembers(ctx)
	if err != nil {
		return nil, err.Error()
	}
	out := make([]memberView, 0, len(ms))
	for _, m := range ms {
		seen := m.LastSeenAt
		out = append(out, memberView{Name: m.Name, OwnedSources: m.OwnedSources, Inflight: m.Inflight, LastSeen: &seen})
	}
	return out, ""
}
