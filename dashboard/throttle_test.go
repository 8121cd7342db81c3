package dashboard

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestThrottle(maxClients int) (*loginThrottle, *fakeClock, *bytes.Buffer) {
	clock := &fakeClock{now: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	return newLoginThrottle(clock.Now, log, maxClients), clock, &buf
}

// takes counts the attempts client may make now, up to 100.
func takes(th *loginThrottle, client string) int {
	n := 0
	for n < 100 {
		if ok, _ := th.take(client); !ok {
			break
		}
		n++
	}
	return n
}

// Each client may try loginBurst tokens at once, then one more every
// loginRefill; clients do not share their allowance; a right token gives
// the client its allowance back; the clock decides, nothing else.
func TestLoginThrottlePerClient(t *testing.T) {
	th, clock, _ := newTestThrottle(16)
	a, b := "192.0.2.1:1000", "192.0.2.2:1000"
	if n := takes(th, a); n != loginBurst {
		t.Fatalf("a fresh client made %d attempts, want %d", n, loginBurst)
	}
	ok, wait := th.take("192.0.2.1:2000") // another port, the same client
	if ok || wait <= 0 || wait > loginRefill {
		t.Errorf("a throttled client's next attempt: ok %v, wait %v; want refused, wait in (0, %v]", ok, wait, loginRefill)
	}
	if n := takes(th, b); n != loginBurst {
		t.Errorf("another client made %d attempts, want %d", n, loginBurst)
	}
	clock.advance(loginRefill)
	if n := takes(th, a); n != 1 {
		t.Errorf("after %v: %d attempts, want 1", loginRefill, n)
	}
	clock.advance(time.Hour)
	if n := takes(th, a); n != loginBurst {
		t.Errorf("after an hour: %d attempts, want %d (no more than the burst)", n, loginBurst)
	}
	th.succeeded(a)
	if n := takes(th, a); n != loginBurst {
		t.Errorf("after a right token: %d attempts, want %d", n, loginBurst)
	}
	// An IPv6 client is its /64: rotating addresses in it does not help.
	if n := takes(th, "[2001:db8::1]:1") + takes(th, "[2001:db8::ffff:2]:2"); n != loginBurst {
		t.Errorf("two addresses of one /64 made %d attempts, want %d", n, loginBurst)
	}
}

// The table is bounded: clients beyond it that find no recovered entry to
// replace share one overflow allowance, so that many addresses guess no
// faster than one more client; recovered entries make room again.
func TestLoginThrottleBounded(t *testing.T) {
	th, clock, _ := newTestThrottle(4)
	for i := range 4 {
		takes(th, fmt.Sprintf("192.0.2.%d:1", i))
	}
	total := 0
	for i := range 50 {
		total += takes(th, fmt.Sprintf("198.51.100.%d:1", i))
	}
	if total != loginBurst {
		t.Errorf("50 clients beyond a full table made %d attempts, want %d (one shared allowance)", total, loginBurst)
	}
	if n := th.len(); n > 4 {
		t.Errorf("the table holds %d clients, bound 4", n)
	}
	clock.advance(loginBurst * loginRefill)
	if n := takes(th, "203.0.113.9:1"); n != loginBurst {
		t.Errorf("once entries recovered, a new client made %d attempts, want %d", n, loginBurst)
	}
	if n := th.len(); n > 4 {
		t.Errorf("the table holds %d clients, bound 4", n)
	}
}

// Wrong tokens are logged at most once a second, with their count.
func TestLoginThrottleLogCoalesced(t *testing.T) {
	th, clock, buf := newTestThrottle(16)
	for i := range 1000 {
		client := fmt.Sprintf("192.0.2.%d:1", i%200)
		if ok, _ := th.take(client); ok {
			th.failed(client)
		} else {
			th.refused(client)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "wrong=1 ") {
		t.Fatalf("1000 attempts in an instant logged %d lines, want 1 (the first):\n%s", len(lines), buf)
	}
	clock.advance(time.Second)
	th.failed("192.0.2.7:1")
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "wrong=") || !strings.Contains(lines[1], "refused=") {
		t.Fatalf("a second later: %d lines, want 2, the second with the counts:\n%s", len(lines), buf)
	}
	// 16 clients x 5 = 80 wrong tokens taken in all (the table holds 16,
	// the overflow 5 more), the rest refused.
	if !strings.Contains(lines[1], fmt.Sprintf("wrong=%d ", 16*loginBurst+loginBurst-1+1)) {
		t.Errorf("second line %q: want the wrong tokens since the first line", lines[1])
	}
}
