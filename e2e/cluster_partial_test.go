package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/cluster"
	"github.com/pacer-dev/pacer/domain"
)

// elsewhere is the first of prefix0, prefix1, ... whose shard the plain
// share of the live members (cluster.Assign) gives to other: a source
// that, without regard to which member has it, lands on a member that
// does not.
func elsewhere(t *testing.T, prefix, other string, live ...string) string {
	t.Helper()
	for i := range 1000 {
		name := fmt.Sprintf("%s%d", prefix, i)
		if cluster.Assign(live, domain.ShardOf(name, "")) == other {
			return name
		}
	}
	t.Fatalf("no name %sN on a shard of %s", prefix, other)
	return ""
}

// Rule 8.1 with members whose configs differ (during a rollout, say): a
// source in one member's config only is owned and polled by that member
// within 2 × lease, and its API shows it as that member's. Before, the
// shard of such a source went to the member the plain share gives it to,
// which does not have it: never polled, while the API showed it pending
// with that member as its owner.
func TestClusterSourceOnOneMember(t *testing.T) {
	dsn, _ := pgStore(t)
	u := newUpstream(t)
	soloM1 := elsewhere(t, "solo-m1-", "m2", "m1", "m2") // only m1 has it; its shard is m2's share
	soloM2 := elsewhere(t, "solo-m2-", "m1", "m1", "m2")
	body := func(solo ...string) string {
		var b strings.Builder
		b.WriteString("concurrency: 4\ndefaults:\n  schedule: \"@every 1s\"\n  timeout: 5s\nsources:\n")
		for _, name := range append([]string{"c0", "c1", "c2", "c3"}, solo...) {
			u.Set("/"+name, behavior{})
			fmt.Fprintf(&b, "  - {name: %s, type: http, url: \"%s\"}\n", name, u.URL("/"+name))
		}
		return b.String()
	}
	ms := []*member{launchMember(t, dsn, "m1", 0, body(soloM1)), launchMember(t, dsn, "m2", 0, body(soloM2))}
	for _, m := range ms {
		m.d.waitReady(30 * time.Second)
	}
	ready := time.Now()
	eventually(t, 2*clusterLease+5*time.Second, "each member's own source owned by it", func() error {
		for i, solo := range []string{soloM1, soloM2} {
			if o := ms[i].owners(t)[solo]; o != ms[i].name {
				return errf("%s (only %s has it): %s shows owner %q", solo, ms[i].name, ms[i].name, o)
			}
		}
		return nil
	})
	t.Logf("the sources in one member's config owned by it within %v of both ready", time.Since(ready).Round(10*time.Millisecond))
	since := time.Now()
	eventually(t, 10*time.Second, "each member's own source polled every tick", func() error {
		for _, solo := range []string{soloM1, soloM2} {
			if n := u.CountSince("/"+solo, since); n < 3 {
				return errf("%s polled %d times since it was owned", solo, n)
			}
		}
		return nil
	})
	for _, name := range []string{"c0", "c1", "c2", "c3"} {
		if u.Count("/"+name) == 0 {
			t.Errorf("%s (in both configs) never polled", name)
		}
	}

	// m2's config gains m1's source (a reload): both have it, and its
	// shard is m2's share again.
	replaceConfig(t, ms[1], body(soloM2, soloM1))
	ms[1].d.signal(syscall.SIGHUP)
	eventually(t, 2*clusterLease+5*time.Second, "m1's source, now in m2's config too, owned by m2", func() error {
		if o := ms[0].owners(t)[soloM1]; o != "m2" {
			return errf("%s: m1 shows owner %q", soloM1, o)
		}
		return nil
	})
	since = time.Now()
	eventually(t, 10*time.Second, "m1's source polled by m2", func() error {
		if n := u.CountSince("/"+soloM1, since); n < 3 {
			return errf("%s polled %d times since m2 owns it", soloM1, n)
		}
		return nil
	})
}

// replaceConfig replaces m's config with body under the header
// launchMember wrote, by a rename (the daemon may read it meanwhile).
func replaceConfig(t *testing.T, m *member, body string) {
	t.Helper()
	old, err := os.ReadFile(m.in.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	header, _, ok := strings.Cut(string(old), "\nconcurrency:") // the line of body, not the cluster's
	if !ok {
		t.Fatalf("config of %s has no concurrency line:\n%s", m.name, old)
	}
	tmp := m.in.cfgPath + ".new"
	writeFile(t, tmp, header+"\n"+body)
	if err := os.Rename(tmp, m.in.cfgPath); err != nil {
		t.Fatal(err)
	}
}
