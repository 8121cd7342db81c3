package scheduler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/hosts"
)

// TestLearnedLimitsSharedAndRestored (contract 13.5, 13.1): a host's
// learned limits written to the store (as a member's host keeper writes
// them) are what every member of a cluster reads within a second, and
// what a member started later starts from; on a cluster each member
// applies its share of the host's limits.
func TestLearnedLimitsSharedAndRestored(t *testing.T) {
	st := openPG(t)
	a, b := newClusterMember(t, st, "a"), newClusterMember(t, st, "b")
	runMember(t, a)
	runMember(t, b)
	dir := t.TempDir()
	body := "hosts: {concurrency: 16, adaptive: true}\nsources:\n"
	for _, n := range []string{"x1", "x2", "x3", "x4", "x5", "x6"} {
		body += "  - {name: " + n + ", type: http, url: \"http://api.example/" + n + "\", schedule: \"@every 1h\"}\n"
	}
	cfg := writeConfig(t, dir, body)
	sa := startMemberScheduler(t, cfg, st, a, nil)
	sb := startMemberScheduler(t, cfg, st, b, nil)
	learned := hosts.Persisted{Host: "api.example", SettingsKey: hosts.SettingsKey(hostSettings(cfg.Hosts.For("api.example"))),
		LearnedConcurrency: 5, LearnedAt: time.Now()}
	data, err := json.Marshal(learned)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveHosts(t.Context(), []domain.HostState{{Host: "api.example", Data: data, UpdatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Scheduler{"a": sa, "b": sb} {
		waitUntil(t, name+" reading the learned limit", 10*time.Second, func() bool {
			o, err := s.Host("api.example")
			return err == nil && o.LearnedConcurrency != nil && *o.LearnedConcurrency == 5
		})
	}
	// Each member's group has its share of the 5 places by its share of
	// the host's sources, and the shares add up to no more than 5.
	waitUntil(t, "the members' shares of the host", 30*time.Second, func() bool {
		ca, cb := groupCap(sa, "api.example"), groupCap(sb, "api.example")
		return ca >= 1 && cb >= 1 && ca+cb <= 5
	})
	// A member started later starts from the stored limits.
	c := newClusterMember(t, st, "c")
	runMember(t, c)
	sc := startMemberScheduler(t, cfg, st, c, nil)
	if o, err := sc.Host("api.example"); err != nil || o.LearnedConcurrency == nil || *o.LearnedConcurrency != 5 {
		t.Fatalf("a member started later: %+v, %v; want the stored learned concurrency 5", o, err)
	}
	// A change of the host's settings forgets what was learned.
	cfg2 := writeConfig(t, dir, "hosts: {concurrency: 8, adaptive: true}\n"+body[len("hosts: {concurrency: 16, adaptive: true}\n"):])
	if err := sc.Reload(t.Context(), cfg2); err != nil {
		t.Fatal(err)
	}
	if o, _ := sc.Host("api.example"); o.LearnedConcurrency != nil && *o.LearnedConcurrency == 5 {
		t.Fatalf("after a change of the host's settings the learned limit %d stays", *o.LearnedConcurrency)
	}
}

// groupCap is the cap of s's host group of host now (0 for none).
func groupCap(s *Scheduler, host string) int {
	s.tab.mu.Lock()
	defer s.tab.unlock()
	if g := s.tab.q.Host(host); g != nil {
		return g.Cap()
	}
	return 0
}
