package dashboard_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The token form limits guessing: after a burst of wrong tokens a client
// gets 429 with Retry-After and the form, without its token being
// compared (the right one is refused too), until its allowance refills
// (5 at once, then one per 2 s). Measured against the wall clock with a
// wide margin: the attempts let through are at most the burst plus one
// per 2 s elapsed.
func TestTokenFormRateLimited(t *testing.T) {
	f := newFixture(t, token)
	start := time.Now()
	wrong, limited := 0, 0
	for range 40 {
		a := f.post("/dash/login", url.Values{"token": {"wrong"}})
		switch a.code {
		case http.StatusUnauthorized:
			wrong++
		case http.StatusTooManyRequests:
			limited++
			ra, err := strconv.Atoi(a.header.Get("Retry-After"))
			if err != nil || ra < 1 || ra > 2 || !strings.Contains(a.body, `name="token"`) {
				t.Fatalf("429: Retry-After %q, want 1 or 2, and the form: %s", a.header.Get("Retry-After"), a)
			}
		default:
			t.Fatalf("a wrong token: %s", a)
		}
	}
	a := f.post("/dash/login", url.Values{"token": {token}})
	elapsed := time.Since(start)
	if allowed := 5 + int(elapsed/(2*time.Second)); wrong > allowed || wrong < 5 {
		t.Errorf("%d wrong tokens compared in %v, want 5 to %d; %d limited", wrong, elapsed, allowed, limited)
	}
	if elapsed < 2*time.Second && a.code != http.StatusTooManyRequests {
		t.Errorf("the right token right after the burst: %s, want 429 (not compared)", a)
	}
}
