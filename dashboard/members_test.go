package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/dashboard"
	"github.com/pacer-dev/pacer/domain"
)

// clusterMembers is a cluster's member list as the daemon's member reads
// it from the store.
type clusterMembers struct {
	ms  []domain.Member
	err error
}

func (c clusterMembers) ClusterMembers(context.Context) ([]domain.Member, error) { return c.ms, c.err }

// TestOverviewMembers: on a cluster the overview (and its refreshed part)
// lists the members with their sources and polls in flight (contract
// 11.1); a single daemon shows no members line; a store that does not
// answer is said.
func TestOverviewMembers(t *testing.T) {
	seen := time.Now().Add(-3 * time.Second)
	get := func(view dashboard.ClusterView, path string) string {
		t.Helper()
		d, err := dashboard.New(newFake(10), dashboard.Options{Cluster: view})
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.RemoteAddr = "127.0.0.1:1234"
		d.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		return w.Body.String()
	}
	two := clusterMembers{ms: []domain.Member{
		{Name: "alpha-1", OwnedSources: 120, Inflight: 3, LastSeenAt: seen},
		{Name: "beta-<2>", OwnedSources: 180, Inflight: 0, LastSeenAt: seen},
	}}
	for _, path := range []string{"/", "/dash/live"} {
		body := get(two, path)
		for _, want := range []string{`id="members"`, `alpha-1</b> 120 sources, 3 in flight`, `beta-&lt;2&gt;</b> 180 sources, 0 in flight`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s on a cluster: no %q in the page", path, want)
			}
		}
		if body := get(nil, path); strings.Contains(body, `id="members"`) {
			t.Errorf("%s on a single daemon shows a members line", path)
		}
		if body := get(clusterMembers{err: errors.New("database unreachable")}, path); !strings.Contains(body, "unknown: database unreachable") {
			t.Errorf("%s: a failing member list is not said", path)
		}
	}
}
