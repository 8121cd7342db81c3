package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/scheduler/hosts"
)

// hostsCollector reports the host groups at scrape time (contract 13.7):
// pacer_hosts by state, and pacer_host_limit only for the hosts whose
// learned limit is below the configured one, so that the series stay
// few whatever the number of hosts.
type hostsCollector struct {
	objects func() []hosts.Object
	hosts   *prometheus.Desc
	limit   *prometheus.Desc
}

func newHostsCollector(objects func() []hosts.Object) hostsCollector {
	return hostsCollector{
		objects: objects,
		hosts:   prometheus.NewDesc("pacer_hosts", "Host groups by state (closed, open, half-open, throttled).", []string{"state"}, nil),
		limit: prometheus.NewDesc("pacer_host_limit",
			"Learned limits of the hosts whose learned limit is below the configured one (kind: concurrency, or rate in starts per second).",
			[]string{"host", "kind"}, nil),
	}
}

func (c hostsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hosts
	ch <- c.limit
}

func (c hostsCollector) Collect(ch chan<- prometheus.Metric) {
	by := map[string]int{hosts.StateClosed: 0, hosts.StateOpen: 0, hosts.StateHalfOpen: 0, hosts.StateThrottled: 0}
	for _, o := range c.objects() {
		by[o.State]++
		if l := o.LearnedConcurrency; l != nil && (o.Concurrency == 0 || *l < o.Concurrency) {
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(*l), o.Host, "concurrency")
		}
		if r := o.LearnedRate; r != nil && (o.Rate == 0 || *r < o.Rate) {
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, *r, o.Host, "rate")
		}
	}
	for state, n := range by {
		ch <- prometheus.MustNewConstMetric(c.hosts, prometheus.GaugeValue, float64(n), state)
	}
}
