package config

import (
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pacer-dev/pacer/internal/backend"
)

// The cluster section (contract section 8): several daemons on one
// PostgreSQL store. Wiring it into Load takes two lines elsewhere: a field
// `Cluster Cluster` in Config, set to DefaultCluster() where the other
// defaults are, and in topKey
//
//	case "cluster": l.cluster(p.val, &cfg.Cluster)
//
// and, after l.store(cfg), `l.checkCluster(cfg.Store, cfg.Cluster)`.

// DefaultClusterLease is cluster.lease when the file does not set it.
const DefaultClusterLease = 10 * time.Second

// MinClusterLease is the shortest cluster.lease accepted.
const MinClusterLease = 2 * time.Second

// Cluster is the cluster section.
type Cluster struct {
	// Set is true when the file has a cluster section.
	Set bool
	// Name is this member's name; "" means HOSTNAME-PID (MemberName).
	Name string
	// Lease is how long a member's claim lasts unrenewed.
	Lease time.Duration
	// Concurrency caps the polls in flight across the cluster; 0 is the
	// sum of the members' concurrency.
	Concurrency int
}

// DefaultCluster is the cluster section of a file that has none.
func DefaultCluster() Cluster { return Cluster{Lease: DefaultClusterLease} }

// MemberName is the member's name: Name, else HOSTNAME-PID.
func (c Cluster) MemberName() string {
	if c.Name != "" {
		return c.Name
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "pacer"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// cluster reads the cluster section into c (which holds the defaults).
func (l *loader) cluster(n *yaml.Node, c *Cluster) {
	c.Set = true
	ps, _ := l.pairs(n, at("cluster"))
	for _, p := range ps {
		kp := at("cluster").key(p.key)
		switch p.key {
		case "name":
			if v, ok := l.str(p.val, kp); ok {
				if strings.TrimSpace(v) != v || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
					l.addf(kp, "must not hold control characters or surrounding spaces")
				} else {
					c.Name = v
				}
			}
		case "lease":
			if v, ok := l.duration(p.val, kp); ok {
				if v < MinClusterLease {
					l.addf(kp, "must be >= %s, got %s", MinClusterLease, v)
				} else {
					c.Lease = v
				}
			}
		case "concurrency":
			if v, ok := l.minInt(p.val, kp, 0); ok {
				c.Concurrency = v
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
}

// checkCluster reports a cluster section on a store that cannot hold a
// cluster (SQLite: one daemon per store, rule 3.13).
func (l *loader) checkCluster(store string, c Cluster) {
	if c.Set && !backend.IsPostgres(store) {
		l.addf(at("cluster"), "needs a PostgreSQL store (store: postgres://...); a SQLite store has one daemon")
	}
}
