package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// tickRecorder is a loopback upstream that records the arrival time of
// every request per source (the path /s/N of source N), so that each
// source's ticks can be matched with its polls: one poll per tick, none
// missed, none doubled (contract rule 8.1), counted where the polls land.
type tickRecorder struct {
	*httptest.Server
	hold   time.Duration
	served atomic.Int64
	mu     sync.Mutex
	at     [][]int64 // per source, the arrivals' Unix nanoseconds
}

// newTickRecorder is the recorder of n sources, each request held hold.
func newTickRecorder(b *testing.B, n int, hold time.Duration) *tickRecorder {
	r := &tickRecorder{hold: hold, at: make([][]int64, n)}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	b.Cleanup(r.Close)
	return r
}

func (r *tickRecorder) serve(w http.ResponseWriter, req *http.Request) {
	now := time.Now().UnixNano()
	i, err := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/s/"))
	if err != nil || i < 0 || i >= len(r.at) {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	r.at[i] = append(r.at[i], now)
	r.mu.Unlock()
	time.Sleep(r.hold)
	_, _ = w.Write([]byte("ok\n"))
	r.served.Add(1)
}

// arrivals is a copy of source i's arrivals.
func (r *tickRecorder) arrivals(i int) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.at[i])
}

// tally is the match of the ticks in a span with the polls that arrived.
type tally struct {
	ticks, once, missed, doubled int // ticks due; polled once, never, more than once
	extra                        int // polls beyond the first of a tick
	lags                         []time.Duration
}

func (t tally) String() string {
	return fmt.Sprintf("%d ticks: %d polled once, %d missed, %d polled twice or more (%d extra polls); lag p50 %v p99 %v max %v",
		t.ticks, t.once, t.missed, t.doubled, t.extra,
		Percentile(t.lags, 0.5).Round(time.Millisecond), Percentile(t.lags, 0.99).Round(time.Millisecond),
		Percentile(t.lags, 1).Round(time.Millisecond))
}

// tickSlack: an arrival is counted for the tick at or before it, less
// this slack (the scheduler never starts a poll before its tick; the
// slack only keeps a clock's rounding from moving a poll to the tick
// before).
const tickSlack = 100 * time.Millisecond

// tallySources matches, for the sources of idx (every source when nil),
// the ticks of "@every every" in (from, to] with their arrivals; first,
// when not nil, receives each tick's first arrival.
func (r *tickRecorder) tallySources(idx []int, every time.Duration, from, to time.Time,
	first func(i int, tick, at time.Time)) tally {
	if idx == nil {
		idx = make([]int, len(r.at))
		for i := range idx {
			idx[i] = i
		}
	}
	var t tally
	for _, i := range idx {
		tm := policy.NewTiming(sourceName(i), config.Every{D: every})
		var ticks []time.Time
		for tk := tm.Next(from); !tk.After(to); tk = tm.Next(tk) {
			ticks = append(ticks, tk)
		}
		got := make([]int, len(ticks))
		firstAt := make([]time.Time, len(ticks))
		for _, ns := range r.arrivals(i) {
			a := time.Unix(0, ns)
			tk := tm.Next(a.Add(tickSlack - every))
			j := slices.IndexFunc(ticks, tk.Equal)
			if j < 0 {
				continue
			}
			if got[j] == 0 {
				firstAt[j] = a
			}
			got[j]++
		}
		t.add(ticks, got, firstAt, func(j int) {
			if first != nil {
				first(i, ticks[j], firstAt[j])
			}
		})
	}
	return t
}

// add counts one source's ticks.
func (t *tally) add(ticks []time.Time, got []int, firstAt []time.Time, polled func(j int)) {
	for j := range ticks {
		t.ticks++
		switch {
		case got[j] == 0:
			t.missed++
			continue
		case got[j] == 1:
			t.once++
		default:
			t.doubled++
			t.extra += got[j] - 1
		}
		t.lags = append(t.lags, firstAt[j].Sub(ticks[j]))
		polled(j)
	}
}

// sourceName is the name of source i in the configs of the benchmarks.
func sourceName(i int) string { return fmt.Sprintf("src-%06d", i) }
