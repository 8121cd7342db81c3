package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/cluster"
	"github.com/pacer-dev/pacer/store"
)

// elsewhere is the first of prefix0, prefix1, ... whose shard the plain
// share of the live members (cluster.Assign) gives to other: a source
// that, without regard to which member has it, lands on a member that
// does not.
func elsewhere(t *testing.T, prefix, other string, live ...string) string {
	t.Helper()
	for i := range 1000 {
		name := fmt.Sprintf("%s%d", prefix, i)
		if cluster.Assign(live, store.ShardOf(name, "")) == other {
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
	body := func(solo string) string {
		var b strings.Builder
		b.WriteString("concurrency: 4\ndefaults:\n  schedule: \"@every 1s\"\n  timeout: 5s\nsources:\n")
		for _, name := range []string{"c0", "c1", "c2", "c3", solo} {
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
}
