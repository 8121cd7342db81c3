package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// adaptiveUpstream answers like an API with a limit pacer must learn:
// with admit > 0, at most admit requests a second (a token bucket) and
// 429 beyond; with slowAfter > 0, a latency of base that doubles once
// more than slowAfter requests are in flight. It counts the answers of
// each second.
type adaptiveUpstream struct {
	srv       *httptest.Server
	lim       *rate.Limiter
	base      time.Duration
	slowAfter int64
	inflight  atomic.Int64
	mu        sync.Mutex
	ok, limit map[int64]int // by Unix second
}

func newAdaptiveUpstream(t *testing.T, admit float64, base time.Duration, slowAfter int64) *adaptiveUpstream {
	u := &adaptiveUpstream{base: base, slowAfter: slowAfter, ok: map[int64]int{}, limit: map[int64]int{}}
	if admit > 0 {
		u.lim = rate.NewLimiter(rate.Limit(admit), int(admit/5)+1)
	}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := u.inflight.Add(1)
		defer u.inflight.Add(-1)
		sec := time.Now().Unix()
		if u.lim != nil && !u.lim.Allow() {
			u.count(u.limit, sec)
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		d := u.base
		if u.slowAfter > 0 && n > u.slowAfter {
			d *= 2
		}
		time.Sleep(d) // the upstream's own latency, what pacer measures
		u.count(u.ok, sec)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *adaptiveUpstream) count(m map[int64]int, sec int64) {
	u.mu.Lock()
	m[sec]++
	u.mu.Unlock()
}

// window is the answers admitted and refused in [from, to) (Unix seconds).
func (u *adaptiveUpstream) window(from, to int64) (ok, limited int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for s := from; s < to; s++ {
		ok += u.ok[s]
		limited += u.limit[s]
	}
	return ok, limited
}

// Learned limits (contract 13.5) through the daemon: a host admitting
// 50 requests a second, 429 beyond, and a host whose latency doubles past
// 8 in flight, each with adaptive on, concurrency 64, rate 0, and many
// more due polls than either allows. Within 2 minutes pacer reaches 75 %
// of 50/s in a 10 s window, with at most 3 % throttled answers after the
// first minute; the latency host's learned concurrency settles between 6
// and 12.
func TestAdaptiveLimitsLearned(t *testing.T) {
	t.Parallel()
	quota := newAdaptiveUpstream(t, 50, 5*time.Millisecond, 0)
	slow := newAdaptiveUpstream(t, 0, 40*time.Millisecond, 8)
	qHost, sHost := strings.TrimPrefix(quota.srv.URL, "http://"), strings.TrimPrefix(slow.srv.URL, "http://")
	in := newInst(t)
	var b strings.Builder
	b.WriteString(`concurrency: 96
shutdown_timeout: 2s
hosts:
  overrides:
    "` + qHost + `": {concurrency: 64, rate: 0, adaptive: true}
    "` + sHost + `": {concurrency: 64, rate: 0, adaptive: true}
defaults:
  schedule: "@every 100ms"
  timeout: 5s
  backoff: {initial: 1s, max: 2s, multiplier: 2, jitter: 0}
  breaker: {failures: 0}
  error_after: 0
sources:
`)
	for i := range 100 {
		fmt.Fprintf(&b, "  - {name: q%03d, type: http, url: %q}\n", i, quota.srv.URL+fmt.Sprintf("/q%d", i))
		fmt.Fprintf(&b, "  - {name: s%03d, type: http, url: %q}\n", i, slow.srv.URL+fmt.Sprintf("/s%d", i))
	}
	in.writeConfig(b.String())
	d := in.start()
	start := time.Now().Unix()

	best := 0.0
	eventually(t, 150*time.Second, "75 % of 50/s in a 10 s window", func() error {
		now := time.Now().Unix()
		for from := start; from+10 <= now; from++ {
			ok, _ := quota.window(from, from+10)
			best = max(best, float64(ok)/10)
		}
		if best < 37.5 {
			return errf("best 10 s window %.1f/s", best)
		}
		return nil
	})
	if now := time.Now().Unix(); now-start < 70 {
		time.Sleep(time.Duration(70-(now-start)) * time.Second) // past the first minute, plus one window
	}
	ok, limited := quota.window(start+60, time.Now().Unix())
	if share := float64(limited) / float64(max(ok+limited, 1)); share > 0.03 {
		t.Errorf("after the first minute %d admitted, %d refused (%.1f %% throttled), want <= 3 %%", ok, limited, 100*share)
	}
	var hs []hostObj
	d.getJSON("/api/hosts", &hs)
	for _, h := range hs {
		if h.Host != sHost {
			continue
		}
		t.Logf("the latency host: learned concurrency %v (%s)", deref(h.LearnedConcurrency), h.Why)
		if h.LearnedConcurrency == nil || *h.LearnedConcurrency < 6 || *h.LearnedConcurrency > 12 {
			t.Errorf("the latency host learned %v, want between 6 and 12: %+v", h.LearnedConcurrency, h)
		}
	}
	t.Logf("best 10 s window %.1f/s of 50; after the first minute %d admitted, %d refused", best, ok, limited)
	d.stop(10 * time.Second)
}
