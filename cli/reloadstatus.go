package cli

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reloadStatus remembers whether the last reload (SIGHUP) was rejected, so
// that an operator sees it without reading the log: a warning on /readyz
// and on the status page, and in the metrics Prometheus itself exports for
// its own config (a failures counter, the time of the last success).
type reloadStatus struct {
	mu       sync.Mutex
	rejected time.Time // when the last reload was rejected; zero: it was not
	problems int       // how many problems it had (0: it failed otherwise)

	failures    prometheus.Counter
	lastSuccess prometheus.Gauge
}

// newReloadStatus registers the reload metrics in reg; loadedAt, the time
// of the start's load, is the first success.
func newReloadStatus(reg prometheus.Registerer, loadedAt time.Time) (*reloadStatus, error) {
	s := &reloadStatus{
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "pacer_config_reload_failures_total",
			Help: "Reloads (SIGHUP) rejected: the config in force stayed."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pacer_config_last_reload_success_timestamp_seconds",
			Help: "When the config in force was loaded (the start or the last accepted reload), in Unix seconds."}),
	}
	s.lastSuccess.Set(float64(loadedAt.UnixNano()) / 1e9)
	for _, c := range []prometheus.Collector{s.failures, s.lastSuccess} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("reload metrics: %w", err)
		}
	}
	return s, nil
}

// record notes a reload's result at now: accepted, or rejected with
// problems problems (0: it failed otherwise).
func (s *reloadStatus) record(accepted bool, problems int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if accepted {
		s.rejected, s.problems = time.Time{}, 0
		s.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
		return
	}
	s.rejected, s.problems = now, problems
	s.failures.Inc()
}

// Warning is "" unless the last reload was rejected; then it says when,
// and that the previous config stays in force. It quotes none of the
// rejected config (which may hold secrets): the log has its problems.
func (s *reloadStatus) Warning() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rejected.IsZero() {
		return ""
	}
	what := "failed"
	switch {
	case s.problems == 1:
		what = "rejected (1 problem in the config)"
	case s.problems > 1:
		what = fmt.Sprintf("rejected (%d problems in the config)", s.problems)
	}
	return fmt.Sprintf("the last reload, at %s, was %s; the previous config stays in force; the log says why",
		s.rejected.UTC().Format(time.DateTime+" UTC"), what)
}
