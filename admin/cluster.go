package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// ClusterView is what GET /api/cluster shows: the live members of the
// cluster this daemon belongs to (contract rule 8.6).
type ClusterView interface {
	ClusterMembers(ctx context.Context) ([]domain.Member, error)
}

// memberJSON is a member as GET /api/cluster shows it.
type memberJSON struct {
	Name              string    `json:"name"`
	StartedAt         time.Time `json:"started_at"`
	LastSeenAt        time.Time `json:"last_seen_at"`
	OwnedSources      int       `json:"owned_sources"`
	Inflight          int       `json:"inflight"`
	ConfigFingerprint string    `json:"config_fingerprint"`
	// ClockOffsetMs is the database's clock minus the member's (rule 8.1:
	// members schedule on the database's clock; one far off is shown).
	ClockOffsetMs int64 `json:"clock_offset_ms"`
}

// cluster answers GET /api/cluster: {"members": [...]}, by name; a daemon
// that is not a member of a cluster has none.
func (a *api) cluster(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Members []memberJSON `json:"members"`
	}{Members: []memberJSON{}}
	if a.clusterView == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	ms, err := a.clusterView.ClusterMembers(ctx)
	if err != nil {
		a.log.Error("admin: cluster members", "err", err)
		writeError(w, http.StatusServiceUnavailable, "cluster members: "+err.Error())
		return
	}
	for _, m := range ms {
		out.Members = append(out.Members, memberJSON{Name: m.Name, StartedAt: m.StartedAt.UTC(), LastSeenAt: m.LastSeenAt.UTC(),
			OwnedSources: m.OwnedSources, Inflight: m.Inflight, ConfigFingerprint: m.ConfigFingerprint,
			ClockOffsetMs: m.ClockOffsetMs})
	}
	writeJSON(w, http.StatusOK, out)
}
