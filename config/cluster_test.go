package config

import (
	"strings"
	"testing"
	"time"
)

// readCluster parses doc, reads its cluster key as Load would, and checks
// it against store; it returns the section and the problems.
func readCluster(t *testing.T, doc, store string) (Cluster, []string) {
	t.Helper()
	root, prob := parseYAML("config.yaml", []byte(doc))
	if prob != nil {
		t.Fatal(prob)
	}
	l := newLoader("config.yaml", "config.yaml", func(string) (string, bool) { return "", false }, Options{})
	c := DefaultCluster()
	ps, _ := l.pairs(root, path{})
	for _, p := range ps {
		if p.key == "cluster" {
			l.cluster(p.val, &c)
		}
	}
	l.checkCluster(store, c)
	var out []string
	for _, p := range l.finish() {
		out = append(out, p.Path+": "+p.Msg)
	}
	return c, out
}

func TestClusterSection(t *testing.T) {
	const pg = "postgres://pacer@db/pacer"
	for _, c := range []struct {
		name, doc, store string
		want             Cluster
		probs            []string
	}{
		{"absent", "store: x\n", "pacer.db", Cluster{Lease: 10 * time.Second}, nil},
		{"defaults", "cluster: {}\n", pg, Cluster{Set: true, Lease: 10 * time.Second}, nil},
		{"all", "cluster: {name: m1, lease: 3s, concurrency: 40}\n", pg, Cluster{Set: true, Name: "m1", Lease: 3 * time.Second, Concurrency: 40}, nil},
		{"bad", "cluster: {name: \" m\", lease: 1s, concurrency: -1, leas: 3s}\n", pg, Cluster{Set: true, Lease: 10 * time.Second},
			[]string{"cluster.name: must not", "cluster.lease: must be >= 2s, got 1s", "cluster.concurrency: must be >= 0", "cluster.leas: unknown key"}},
		{"sqlite", "cluster: {name: m1}\n", "/var/lib/pacer/pacer.db", Cluster{Set: true, Name: "m1", Lease: 10 * time.Second},
			[]string{"cluster: needs a PostgreSQL store"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, probs := readCluster(t, c.doc, c.store)
			if got != c.want {
				t.Errorf("cluster = %+v, want %+v", got, c.want)
			}
			if len(probs) != len(c.probs) {
				t.Fatalf("problems %q, want %d: %q", probs, len(c.probs), c.probs)
			}
			for _, w := range c.probs {
				found := false
				for _, p := range probs {
					found = found || strings.HasPrefix(p, w)
				}
				if !found {
					t.Errorf("no problem starting %q in %q", w, probs)
				}
			}
		})
	}
	if n := (Cluster{}).MemberName(); !strings.Contains(n, "-") {
		t.Errorf("default member name %q, want HOSTNAME-PID", n)
	}
	if n := (Cluster{Name: "m1"}).MemberName(); n != "m1" {
		t.Errorf("MemberName = %q", n)
	}
}

// TestClusterLoaded checks that Load reads the cluster section and refuses
// it on a SQLite store (the three hook lines).
func TestClusterLoaded(t *testing.T) {
	const srcs = "sources:\n  - {name: a, type: http, url: \"http://127.0.0.1:1/\", schedule: \"@every 1s\"}\n"
	cfg := mustLoad(t, "store: postgres://pacer@db/pacer\ncluster: {name: m1, lease: 2s, concurrency: 7}\n"+srcs, nil)
	if want := (Cluster{Set: true, Name: "m1", Lease: 2 * time.Second, Concurrency: 7}); cfg.Cluster != want {
		t.Fatalf("cluster = %+v, want %+v", cfg.Cluster, want)
	}
	if cfg := mustLoad(t, srcs, nil); cfg.Cluster.Set || cfg.Cluster.Lease != DefaultClusterLease {
		t.Fatalf("no section: cluster = %+v", cfg.Cluster)
	}
	if ps := mustFail(t, "cluster: {name: m1}\n"+srcs, nil); !hasPrefix(ps, "cluster: needs a PostgreSQL store") {
		t.Fatalf("sqlite: problems = %v", ps)
	}
}
