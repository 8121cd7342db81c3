package scheduler

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// pollLog records the polls of a scheduler built by startRecording: the
// time of each (time.Now: in a synctest bubble, the bubble's clock, which
// the wall-clock steps of a stepClock do not move), per source. A source
// named in fail fails.
type pollLog struct {
	mu    sync.Mutex
	polls map[string][]time.Time
	fail  map[string]bool
	hold  time.Duration // how long each poll takes
}

func (l *pollLog) times(name string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.polls[name]...)
}

func (l *pollLog) setFail(name string, fail bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[name] = fail
}

type recordingPoller struct {
	name string
	log  *pollLog
}

func (p recordingPoller) Poll(context.Context) sources.Result {
	p.log.mu.Lock()
	p.log.polls[p.name] = append(p.log.polls[p.name], time.Now())
	fail, hold := p.log.fail[p.name], p.log.hold
	p.log.mu.Unlock()
	time.Sleep(hold) // the bubble's fake time
	if fail {
		return sources.Result{Err: errors.New("down"), ExitCode: -1}
	}
	return sources.Result{StatusCode: 200, ExitCode: -1}
}

// startRecording starts a scheduler on cfg and a SQLite store in dir,
// with clock (nil: the real one), whose polls only record themselves in
// the returned log. The scheduler is shut down and the store closed when
// the test ends.
func startRecording(t *testing.T, dir string, cfg *config.Config, clock Clock) (*Scheduler, *pollLog) {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := &pollLog{polls: map[string][]time.Time{}, fail: map[string]bool{}}
	s, err := New(cfg, Options{Store: st, Registry: prometheus.NewRegistry(), Clock: clock, CommandInterval: time.Hour,
		NewPoller: func(src *config.Source) (sources.Poller, error) {
			return recordingPoller{name: src.Name, log: log}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(3 * time.Second); err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, log
}

// gaps returns the intervals between consecutive times.
func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

// storedState reads name's committed state from the store in dir through a
// second handle.
func storedState(t *testing.T, dir, name string) domain.SourceState {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, ok, err := st.GetState(context.Background(), name)
	if err != nil || !ok {
		t.Fatalf("stored state of %s: found=%v err=%v", name, ok, err)
	}
	return s
}
