package dashboard

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// The token form's limit on guessing (a wrong token answered at once let
// one client try 4,561 a second, each logged).
const (
	// loginBurst is how many tokens a client may enter at once.
	loginBurst = 5
	// loginRefill is how often a client gets one more attempt after that.
	loginRefill = 2 * time.Second
	// loginClients bounds the clients tracked (about 100 bytes each).
	loginClients = 1024
	// loginLogEvery is the least time between two log lines about wrong
	// tokens; each line counts the attempts since the previous one.
	loginLogEvery = time.Second
)

// loginThrottle limits the tokens entered in the page's form per client
// (an IPv4 address, or an IPv6 /64: one machine may hold a whole /64):
// a token bucket of loginBurst attempts refilled one per loginRefill,
// taken before the token is compared, so that parallel attempts do not
// get past it. The table of clients is bounded: a new client replaces one
// whose allowance has fully recovered, else it shares the overflow
// bucket with the other clients beyond the table, so that many addresses
// guess no faster than one more client. Wrong and refused attempts are
// logged at most once per loginLogEvery, with their counts. Safe for
// concurrent use; the clock is injected.
type loginThrottle struct {
	now func() time.Time
	log *slog.Logger
	max int

	mu       sync.Mutex
	clients  map[netip.Prefix]*bucket
	overflow bucket
	// logged is when the last line was logged; wrong and refusedN count
	// the attempts since.
	logged          time.Time
	wrong, refusedN int
}

// bucket is one client's allowance: tokens attempts as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

func newLoginThrottle(now func() time.Time, log *slog.Logger, maxClients int) *loginThrottle {
	return &loginThrottle{now: now, log: log, max: max(maxClients, 1), clients: map[netip.Prefix]*bucket{},
		overflow: bucket{tokens: loginBurst}}
}

// level returns b's allowance at now.
func (b *bucket) level(now time.Time) float64 {
	return min(loginBurst, b.tokens+float64(now.Sub(b.at))/float64(loginRefill))
}

// clientOf is the client a remote address (host:port) belongs to.
func clientOf(remote string) netip.Prefix {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// bucketOf returns the bucket of client, adding it (see loginThrottle);
// mu is held.
func (t *loginThrottle) bucketOf(client netip.Prefix, now time.Time) *bucket {
	if b := t.clients[client]; b != nil {
		return b
	}
	if len(t.clients) >= t.max {
		for k, b := range t.clients {
			if b.level(now) >= loginBurst {
				delete(t.clients, k)
			}
		}
	}
	if len(t.clients) >= t.max {
		return &t.overflow
	}
	b := &bucket{tokens: loginBurst, at: now}
	t.clients[client] = b
	return b
}

// take takes one attempt from the allowance of the client at remote; when
// there is none, ok is false and wait is how long until there is one.
func (t *loginThrottle) take(remote string) (ok bool, wait time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucketOf(clientOf(remote), now)
	lvl := b.level(now)
	if lvl < 1 {
		return false, time.Duration((1 - lvl) * float64(loginRefill))
	}
	b.tokens, b.at = lvl-1, now
	return true, 0
}

// succeeded gives the client at remote its whole allowance back (it knows
// the token).
func (t *loginThrottle) succeeded(remote string) {
	t.mu.Lock()
	delete(t.clients, clientOf(remote))
	t.mu.Unlock()
}

// failed logs (coalesced) a wrong token from remote.
func (t *loginThrottle) failed(remote string) { t.note(remote, false) }

// refused logs (coalesced) an attempt from remote refused by the limit.
func (t *loginThrottle) refused(remote string) { t.note(remote, true) }

// note counts an attempt and logs a line with the counts when the last
// one is loginLogEvery old.
func (t *loginThrottle) note(remote string, refused bool) {
	now := t.now()
	t.mu.Lock()
	if refused {
		t.refusedN++
	} else {
		t.wrong++
	}
	if !t.logged.IsZero() && now.Sub(t.logged) < loginLogEvery {
		t.mu.Unlock()
		return
	}
	wrong, ref := t.wrong, t.refusedN
	t.logged, t.wrong, t.refusedN = now, 0, 0
	t.mu.Unlock()
	t.log.Warn("dashboard: wrong token entered", "remote", remote, "wrong", wrong, "refused", ref)
}

// len returns how many clients are tracked.
func (t *loginThrottle) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients)
}
