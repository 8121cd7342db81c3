package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/internal/waitfor"
)

// owner is a queue owner for the tests: it admits every job, records the
// jobs given back, and sleeps on a channel the test closes.
type owner struct {
	mu       sync.Mutex
	requeued []string
	wake     chan struct{} // Sleep returns true once it is closed
}

func (o *owner) Admit(context.Context, Job[*item]) bool { return true }
func (o *owner) Now() time.Time                         { return time.Unix(1_800_000_000, 0) }
func (o *owner) Requeue(j Job[*item]) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requeued = append(o.requeued, j.Name)
}
func (o *owner) Sleep(ctx context.Context, _ time.Duration) bool {
	select {
	case <-o.wake:
		return true
	case <-ctx.Done():
		return false
	}
}

var _ Owner[*item] = (*owner)(nil)

// start returns a queue with one `limit` group g of l, its admitter
// running until the test ends.
func start(t *testing.T, o *owner, l config.Limit) (*Queue[*item], *Group[*item], *sync.WaitGroup) {
	q := New[*item](o)
	var wg sync.WaitGroup
	spawn := func(ctx context.Context, fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(ctx) }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); wg.Wait() })
	q.SetLimits(ctx, map[string]config.Limit{"g": l}, spawn)
	return q, q.Group("g"), &wg
}

func jobOf(q *Queue[*item], name string) Job[*item] {
	it := newItem()
	if !q.Take(&it.slot) {
		panic("taken twice")
	}
	return Job[*item]{Source: it, Name: name, Route: Route[*item]{KindLimit: q.Group("g")}}
}

// TestPermitReleasedByDone: a job holds its group's permit from its
// admission until Done, whatever the worker did with it; the next job of a
// group of concurrency 1 waits for it.
func TestPermitReleasedByDone(t *testing.T) {
	q, g, _ := start(t, &owner{wake: make(chan struct{})}, config.Limit{Concurrency: 1})
	q.Add(jobOf(q, "a"))
	q.Add(jobOf(q, "b"))
	ctx := t.Context()
	a, ok := q.Get(ctx)
	if !ok || a.Name != "a" || g.Held() != 1 {
		t.Fatalf("first job %q (%v), group holds %d; want a holding 1", a.Name, ok, g.Held())
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if j, ok := q.Get(short); ok {
		t.Fatalf("got %q while a held the group's only permit", j.Name)
	}
	q.Done(a)
	b, ok := q.Get(ctx)
	if !ok || b.Name != "b" || g.Held() != 1 {
		t.Fatalf("second job %q (%v), group holds %d; want b holding 1", b.Name, ok, g.Held())
	}
	q.Done(b)
	if g.Held() != 0 {
		t.Errorf("group holds %d after both jobs are done", g.Held())
	}
}

// TestPermitReleasedWhenGivenBack: a job whose group is retired while it
// holds the group's permit and waits for its token goes back to its
// owner, and its permit with it.
func TestPermitReleasedWhenGivenBack(t *testing.T) {
	o := &owner{wake: make(chan struct{})}
	q, g, wg := start(t, o, config.Limit{Concurrency: 1, Rate: 1, Burst: 1})
	q.Add(jobOf(q, "a")) // takes the only token
	a, ok := q.Get(t.Context())
	if !ok {
		t.Fatal("no first job")
	}
	q.Done(a)
	q.Add(jobOf(q, "b")) // holds the permit, sleeps for its token
	waitfor.True(t, 10*time.Second, "b holding the group's permit", func() bool { return g.Held() == 1 })
	q.SetLimits(context.Background(), nil, nil) // retires g
	wg.Wait()
	if g.Held() != 0 || len(o.requeued) != 1 || o.requeued[0] != "b" {
		t.Errorf("after the group's retirement: %d permits held, requeued %v; want 0 and [b]", g.Held(), o.requeued)
	}
}

// TestRouteThroughTwoKinds: a job whose route has a `limit` group and a
// host group holds a permit of each once it reaches the global queue, and
// Done gives both back.
func TestRouteThroughTwoKinds(t *testing.T) {
	q, g, wg := start(t, &owner{wake: make(chan struct{})}, config.Limit{Concurrency: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spawn := func(ctx context.Context, fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(ctx) }()
	}
	host := q.startGroup(ctx, "api.example", KindHost, config.Limit{Concurrency: 2}, spawn)
	j := jobOf(q, "a")
	j.Route[KindHost] = host
	q.Add(j)
	got, ok := q.Get(t.Context())
	if !ok || g.Held() != 1 || host.Held() != 1 {
		t.Fatalf("job %q (%v): limit group holds %d, host group %d; want 1 and 1", got.Name, ok, g.Held(), host.Held())
	}
	q.Done(got)
	if g.Held() != 0 || host.Held() != 0 {
		t.Errorf("after Done: limit group holds %d, host group %d; want 0 and 0", g.Held(), host.Held())
	}
}
