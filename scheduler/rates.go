package scheduler

import (
	dto "github.com/prometheus/client_model/go"

	"github.com/pacer-dev/pacer/scheduler/rates"
)

// Rates returns the last hour of the daemon's load, a sample every 10 s,
// oldest first: the polls per second by outcome and the polls in flight
// against the cap (the status page's charts, contract 15.4). Empty until
// the scheduler has run for 10 s.
func (s *Scheduler) Rates() []rates.Sample {
	return s.deps.rates.Samples()
}

// rateReading reads the counters the metrics keep (pacer_polls_total by
// outcome) and the load now, for the sampler. A function, not a method:
// the Scheduler's methods are its API.
func rateReading(s *Scheduler) rates.Reading {
	var r rates.Reading
	for i, name := range rates.OutcomeNames() {
		var m dto.Metric
		if err := s.deps.m.poll(name).Write(&m); err == nil {
			r.Polls[i] = m.GetCounter().GetValue()
		}
	}
	r.Inflight, r.Limit = s.Load()
	return r
}
