package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestClusterEndpointAlone: a daemon that is not a member of a cluster
// answers GET /api/cluster with no members, and its sources have a null
// owner (rule 8.6); other methods get 405. The members of a real cluster
// are checked end to end (e2e TestClusterOnePollPerTick).
func TestClusterEndpointAlone(t *testing.T) {
	f := newFixture(t)
	a := f.do(http.MethodGet, "/api/cluster", "", nil)
	if a.code != http.StatusOK || strings.TrimSpace(string(a.body)) != `{"members":[]}` {
		t.Fatalf("GET /api/cluster alone: %s", a)
	}
	if a := f.do(http.MethodPost, "/api/cluster", "", nil); a.code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/cluster: %s", a)
	}
	b := f.do(http.MethodGet, "/api/sources/idle", "", nil)
	var o map[string]any
	if err := json.Unmarshal(b.body, &o); err != nil {
		t.Fatalf("GET /api/sources/idle: %v: %s", err, b)
	}
	if v, ok := o["owner"]; !ok || v != nil {
		t.Errorf("owner of a single daemon's source = %v (present %v), want null", v, ok)
	}
}
