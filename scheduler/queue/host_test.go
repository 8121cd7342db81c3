package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/internal/waitfor"
)

// countingSpawn runs fn in a goroutine and counts the goroutines started
// and still running.
type countingSpawn struct {
	wg               sync.WaitGroup
	started, running atomic.Int64
}

func (c *countingSpawn) spawn(ctx context.Context, fn func(context.Context)) {
	c.wg.Add(1)
	c.started.Add(1)
	c.running.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.running.Add(-1)
		fn(ctx)
	}()
}

// TestIdleHostGroupsCostNoGoroutine: 2,000 host groups with nothing
// waiting run no admitter; a job starts one, which ends once the queue is
// empty again.
func TestIdleHostGroupsCostNoGoroutine(t *testing.T) {
	q := New[*item](&owner{wake: make(chan struct{})})
	var sp countingSpawn
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); sp.wg.Wait() })
	limits := map[string]config.Limit{}
	for i := range 2000 {
		limits[fmt.Sprintf("h%d.example", i)] = config.Limit{Concurrency: 2, Burst: 1}
	}
	limits["api.example"] = config.Limit{Concurrency: 2, Burst: 1}
	q.SetHosts(ctx, limits, sp.spawn)
	if n := sp.started.Load(); n != 0 {
		t.Fatalf("%d admitters started for idle host groups, want 0", n)
	}
	it := newItem()
	q.Take(&it.slot)
	q.Add(Job[*item]{Source: it, Name: "a", Route: Route[*item]{KindHost: q.Host("api.example")}})
	got, ok := q.Get(t.Context())
	if !ok || got.Name != "a" || q.Host("api.example").Held() != 1 {
		t.Fatalf("job %q (%v), host holds %d", got.Name, ok, q.Host("api.example").Held())
	}
	q.Done(got)
	if n := sp.started.Load(); n != 0 {
		t.Fatalf("%d admitters started for a job that passed at once, want 0", n)
	}
}

// TestHostLimitChangesInPlace: a host group's cap lowered while its places
// are held admits nothing more until enough are given back; raised, it
// admits the job that waits.
func TestHostLimitChangesInPlace(t *testing.T) {
	q := New[*item](&owner{wake: make(chan struct{})})
	var sp countingSpawn
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); sp.wg.Wait() })
	q.SetHosts(ctx, map[string]config.Limit{"h": {Concurrency: 2, Burst: 1}}, sp.spawn)
	job := func(name string) Job[*item] {
		it := newItem()
		q.Take(&it.slot)
		return Job[*item]{Source: it, Name: name, Route: Route[*item]{KindHost: q.Host("h")}}
	}
	q.Add(job("a"))
	q.Add(job("b"))
	a, _ := q.Get(t.Context())
	b, _ := q.Get(t.Context())
	q.SetHostLimit("h", config.Limit{Concurrency: 1, Burst: 1})
	q.Add(job("c"))
	q.Done(a) // 1 held, cap 1: c still waits
	short, stop := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer stop()
	if got, ok := q.Get(short); ok {
		t.Fatalf("job %q admitted with the cap lowered to 1 and 1 held", got.Name)
	}
	if h := q.Host("h"); h.Held() != 1 || h.Cap() != 1 {
		t.Fatalf("held %d of %d, want 1 of 1", h.Held(), h.Cap())
	}
	q.SetHostLimit("h", config.Limit{Concurrency: 3, Burst: 1})
	c, ok := q.Get(t.Context())
	if !ok || c.Name != "c" || !c.HostWaited || c.HostInflight != 2 {
		t.Fatalf("job %q (%v) waited %v inflight %d; want c, waited, 2 in flight", c.Name, ok, c.HostWaited, c.HostInflight)
	}
	q.Done(b)
	q.Done(c)
	if n := q.Host("h").Held(); n != 0 {
		t.Fatalf("%d places held after every job is done", n)
	}
	// c waited: an admitter ran for it, and ended once nothing waited.
	waitfor.True(t, 10*time.Second, "the admitter ending once nothing waits", func() bool { return sp.running.Load() == 0 })
	if n := sp.started.Load(); n < 1 {
		t.Fatalf("%d admitters started for a job that waited, want at least 1", n)
	}
}

// TestHostGroupMemory reports the bytes of a host group with a cap and a
// rate (its struct, semaphore, FIFO and token bucket), 2,000 of them, and
// holds it under 1 KiB with the host room's state (issue 22: memory per
// host <= 1 KiB; the host room's part is measured in scheduler/hosts).
func TestHostGroupMemory(t *testing.T) {
	q := New[*item](&owner{wake: make(chan struct{})})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	limits := make(map[string]config.Limit, 2000)
	for i := range 2000 {
		limits[fmt.Sprintf("h%d.example", i)] = config.Limit{Concurrency: 4, Rate: 2, Burst: 1}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	q.SetHosts(ctx, limits, func(context.Context, func(context.Context)) {})
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / 2000
	t.Logf("%.0f bytes per host group (2,000 groups, the map included)", per)
	if per > 300 {
		t.Errorf("%.0f bytes per host group, want <= 300 (1 KiB with the host room's ~725)", per)
	}
	runtime.KeepAlive(q)
}
