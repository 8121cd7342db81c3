package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/maintenance"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// Outcomes counted by pacer_polls_total besides those of a poll record
// (domain.OutcomeSuccess, OutcomeFailure, OutcomeThrottled,
// OutcomeInterrupted): finish counts every outcome under its kind, a poll
// its breaker refused as countRejected (policy.KindRejected), a poll that failed
// for lack of pacer's own resources as countLocal (policy.KindLocal), and the ticks
// that passed while a source was busy as countSkipped.
const (
	countRejected = policy.KindRejected
	countSkipped  = "skipped"
	countLocal    = policy.KindLocal
)

// metrics are the scheduler's Prometheus collectors (contract section 6).
// Per-source series are gauges only, computed at scrape time.
type metrics struct {
	inflight      prometheus.Gauge
	limit         prometheus.Gauge
	semaphoreWait prometheus.Histogram
	polls         *prometheus.CounterVec
	pollsBy       map[string]prometheus.Counter // polls' children, resolved once
	duration      prometheus.Histogram
	lag           prometheus.Histogram
	storeErrors   prometheus.Counter
	storeCommit   prometheus.Histogram
	// results counts successful polls by result (contract 9.6): changed
	// and unchanged, resolved once.
	results            *prometheus.CounterVec
	changed, unchanged prometheus.Counter
	// deliveries counts deliveries by outcome (contract 9.6): success and
	// failure, resolved once.
	deliveries                  *prometheus.CounterVec
	delivered, deliveryFailures prometheus.Counter
}

// sourceCounts returns the number of sources per state and, with perSource,
// the consecutive failures of each source that has any (board.stateCounts).
type sourceCounts func(perSource bool) (map[string]int, []sourceFailures)

// newMetrics registers the scheduler's collectors on reg. counts feeds the
// per-state and per-source gauges at scrape time; nil leaves them out (the
// flusher's tests need only the store metrics).
func newMetrics(reg prometheus.Registerer, counts sourceCounts) (*metrics, error) {
	m := &metrics{
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pacer_inflight", Help: "Polls in flight."}),
		limit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pacer_concurrency_limit", Help: "Effective global cap on polls in flight."}),
		semaphoreWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pacer_semaphore_wait_seconds", Help: "Time a due poll waited for a global permit.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pacer_polls_total", Help: "Polls by policy.Outcome (skipped: a tick arrived while the source was busy; rejected: refused by its breaker; local_error: failed for lack of pacer's own resources, such as file descriptors or memory, and retried without counting against the source)."},
			[]string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pacer_poll_duration_seconds", Help: "Duration of polls.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pacer_schedule_lag_seconds", Help: "Poll start minus due time.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pacer_store_errors_total", Help: "Failed store operations."}),
		storeCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pacer_store_commit_seconds", Help: "Duration of the flusher's commits of poll results, failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
	}
	m.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pacer_results_total", Help: "Successful polls by result: changed (a digest other than the last delivered one) or unchanged (the same digest, or a 304 to a conditional GET)."},
		[]string{"result"})
	m.changed, m.unchanged = m.results.WithLabelValues("changed"), m.results.WithLabelValues("unchanged")
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pacer_deliveries_total", Help: "Deliveries of results to a source's deliver targets by policy.Outcome: success (every target took it) or failure (the poll failed with deliver: ...)."},
		[]string{"outcome"})
	m.delivered, m.deliveryFailures = m.deliveries.WithLabelValues("success"), m.deliveries.WithLabelValues("failure")
	m.pollsBy = make(map[string]prometheus.Counter, 7)
	for _, o := range []string{domain.OutcomeSuccess, domain.OutcomeFailure, domain.OutcomeThrottled, countRejected, countSkipped, domain.OutcomeInterrupted, countLocal} {
		m.pollsBy[o] = m.polls.WithLabelValues(o)
	}
	cs := []prometheus.Collector{m.inflight, m.limit, m.semaphoreWait, m.polls, m.duration, m.lag, m.storeErrors, m.storeCommit, m.results, m.deliveries}
	if counts != nil {
		cs = append(cs, newSourcesCollector(counts))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// sourcesCollector reports per-state counts and per-source failure gauges
// from the scheduler's state at scrape time. A source with no consecutive
// failure has no failure series (contract section 6): a healthy fleet
// exports none.
type sourcesCollector struct {
	counts   sourceCounts
	sources  *prometheus.Desc // pacer_sources{state}
	failures *prometheus.Desc // pacer_source_consecutive_failures{source}
}

func newSourcesCollector(counts sourceCounts) sourcesCollector {
	return sourcesCollector{
		counts:  counts,
		sources: prometheus.NewDesc("pacer_sources", "Sources by state.", []string{"state"}, nil),
		failures: prometheus.NewDesc("pacer_source_consecutive_failures",
			"Consecutive failures of each source.", []string{"source"}, nil),
	}
}

func (c sourcesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sources
	ch <- c.failures
}

func (c sourcesCollector) Collect(ch chan<- prometheus.Metric) {
	counts, failures := c.counts(true)
	for _, st := range policy.States() {
		ch <- prometheus.MustNewConstMetric(c.sources, prometheus.GaugeValue, float64(counts[st]), st)
	}
	for _, f := range failures {
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(f.n), f.name)
	}
}

// poll returns the pacer_polls_total counter of an outcome: one of the
// outcomes registered in newMetrics, without the label lookup of the vector.
func (m *metrics) poll(outcome string) prometheus.Counter {
	if c, ok := m.pollsBy[outcome]; ok {
		return c
	}
	return m.polls.WithLabelValues(outcome)
}

// result returns the pacer_results_total counter of a successful poll.
func (m *metrics) result(changed bool) prometheus.Counter {
	if changed {
		return m.changed
	}
	return m.unchanged
}

// delivery returns the pacer_deliveries_total counter of an outcome.
func (m *metrics) delivery(ok bool) prometheus.Counter {
	if ok {
		return m.delivered
	}
	return m.deliveryFailures
}

// sourceFailures is one source's consecutive failures, for the metrics.
type sourceFailures struct {
	name string
	n    int
}

// stateCounts returns the number of sources per state and, with
// perSource, the consecutive failures of each source that has any (the
// others export no series). It holds mu for one pass over the entries that
// only reads and appends: with 100,000 sources a scrape must not stall the
// loop for long.
func (b *board) stateCounts(perSource bool) (map[string]int, []sourceFailures) {
	var byState [policy.NumStates]int
	var failures []sourceFailures
	b.mu.Lock()
	now := b.clock.Now()
	for name, e := range b.entries {
		if e.removed {
			continue
		}
		shown, _ := maintenance.Overlay(b.cfg, name, &e.st, now)
		byState[stateIndex(policy.StateOf(shown, now))]++
		if perSource && e.st.ConsecutiveFailures > 0 {
			failures = append(failures, sourceFailures{name, e.st.ConsecutiveFailures})
		}
	}
	b.unlock()
	counts := make(map[string]int, len(policy.States()))
	for i, st := range policy.States() {
		counts[st] = byState[i]
	}
	return counts, failures
}

// stateIndex is the index of st in policy.States().
func stateIndex(st string) int {
	for i, s := range policy.States() {
		if s == st {
			return i
		}
	}
	return 0
}
