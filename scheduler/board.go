package scheduler

import (
	"github.com/pacer-dev/pacer/config"
)

// This file holds the read-only views of the running scheduler that the
// dashboard and the API's "why" field need. None of them changes anything.

// Explained is a source object with Why, the explanation of its wait
// (Explain). It is the admin API's source object: "why" is a field added to
// those of contract section 4.
type Explained struct {
	SourceObject
	Why string `json:"why"`
}

// Row is one source as the dashboard's table filters and sorts it: the
// few fields it needs, copied in one pass, so that a page over 100,000
// sources builds no full source object but those it shows.
type Row struct {
	Name        string
	Type        string
	State       string
	Failures    int
	LastSuccess int64 // UnixNano; 0 = none
	NextRun     int64 // UnixNano; 0 = none (also in error and paused)
}

// Rows returns every configured source as a Row, in configuration order.
func (s *Scheduler) Rows() []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	out := make([]Row, 0, len(s.cfg.Sources))
	for i := range s.cfg.Sources {
		e := s.entries[s.cfg.Sources[i].Name]
		if e == nil {
			continue
		}
		r := Row{Name: e.name, Type: e.src.Type, State: StateOf(&e.st, now), Failures: e.st.ConsecutiveFailures}
		if t := e.st.LastSuccessAt; t != nil && !t.IsZero() {
			r.LastSuccess = t.UnixNano()
		}
		if t := e.st.NextRunAt; t != nil && !t.IsZero() && r.State != StateError && r.State != StatePaused {
			r.NextRun = t.UnixNano()
		}
		out = append(out, r)
	}
	return out
}

// ExplainSources returns the named sources (unknown names are left out),
// in the order given, or every source in configuration order when names is
// nil, each with the explanation of its wait.
func (s *Scheduler) ExplainSources(names []string) []Explained {
	remote := s.remoteStates(names)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var es []*entry
	if names == nil {
		es = make([]*entry, 0, len(s.cfg.Sources))
		for i := range s.cfg.Sources {
			if e := s.entries[s.cfg.Sources[i].Name]; e != nil {
				es = append(es, e)
			}
		}
	} else {
		for _, n := range names {
			if e, err := s.entry(n); err == nil {
				es = append(es, e)
			}
		}
	}
	qs := s.queueInfo(es)
	out := make([]Explained, len(es))
	for i, e := range es {
		st := &e.st
		if r, ok := remote[e.name]; ok && s.dormant(e) {
			st = &r // another member's source: as its owner committed it
		}
		out[i] = Explained{
			SourceObject: View(e.src, st, now, s.redact.Redact),
			Why:          Explain(e.src, st, now, qs[e], s.redact.Redact),
		}
		out[i].Owner = s.owner(e)
	}
	return out
}

// ExplainSource returns one source with its explanation, or ErrNotFound.
func (s *Scheduler) ExplainSource(name string) (Explained, error) {
	s.mu.Lock()
	_, err := s.entry(name)
	s.mu.Unlock()
	if err != nil {
		return Explained{}, err
	}
	out := s.ExplainSources([]string{name})
	if len(out) == 0 { // removed by a reload in between
		return Explained{}, ErrNotFound
	}
	return out[0], nil
}

// Load returns the polls in flight and the effective global cap.
func (s *Scheduler) Load() (inflight, limit int) {
	s.mu.Lock()
	limit = s.limitOf(s.cfg)
	s.mu.Unlock()
	return int(s.inflightN.Load()), limit
}

// SourceConfig returns a copy of a source's effective settings and the
// redactor of the configuration in force (to show them with the secrets
// masked), or ErrNotFound.
func (s *Scheduler) SourceConfig(name string) (config.Source, *config.Redactor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.entry(name)
	if err != nil {
		return config.Source{}, nil, err
	}
	return *e.src, s.redact, nil
}

// queueInfo finds where the busy ones of es wait: one pass over the global
// queue and over the queue of each group one of them belongs to. The idle
// ones get the zero QueueInfo. mu held (the order mu, then a queue's lock,
// is dispatch's).
func (s *Scheduler) queueInfo(es []*entry) map[*entry]QueueInfo {
	want := make(map[*entry]bool)
	groups := make(map[*group]bool)
	for _, e := range es {
		if e.busy {
			want[e] = true
			if e.group != nil {
				groups[e.group] = true
			}
		}
	}
	out := make(map[*entry]QueueInfo, len(want))
	if len(want) == 0 {
		return out
	}
	for e := range want {
		out[e] = QueueInfo{Busy: true}
	}
	s.ready.positions(want, QueueGlobal, out)
	for g := range groups {
		g.q.positions(want, g.name, out)
	}
	return out
}

// positions records, for each job of q whose entry is in want, the queue's
// name and the number of jobs ahead of it.
func (q *fifo) positions(want map[*entry]bool, name string, out map[*entry]QueueInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, j := range q.items[q.head:] {
		if want[j.e] {
			out[j.e] = QueueInfo{Busy: true, Queue: name, Ahead: i}
		}
	}
}
