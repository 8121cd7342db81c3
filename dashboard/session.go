package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/internal/loopback"
)

// Cookie names.
const (
	sessionCookie = "pacer_session"
	flashCookie   = "pacer_flash"
)

// sessions are the dashboard's logged-in browsers: a bounded map, in
// memory only (a restart logs everyone out), from the SHA-256 of a random
// 32-byte session id to its expiry. The id itself is kept only by the
// browser, in an HttpOnly cookie.
type sessions struct {
	mu  sync.Mutex
	m   map[[sha256.Size]byte]time.Time
	ttl time.Duration
	max int
	now func() time.Time
}

func newSessions(ttl time.Duration, max int, now func() time.Time) *sessions {
	if ttl <= 0 {
		ttl = 12 * time.Hour
	}
	if max <= 0 {
		max = 1000
	}
	return &sessions{m: make(map[[sha256.Size]byte]time.Time), ttl: ttl, max: max, now: now}
}

// create opens a session and returns its id. When the map is full, expired
// sessions go first, then the one expiring soonest.
func (s *sessions) create() (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		for k, exp := range s.m {
			if !now.Before(exp) {
				delete(s.m, k)
			}
		}
	}
	for len(s.m) >= s.max {
		var oldest [sha256.Size]byte
		var at time.Time
		for k, exp := range s.m {
			if at.IsZero() || exp.Before(at) {
				oldest, at = k, exp
			}
		}
		delete(s.m, oldest)
	}
	s.m[sha256.Sum256([]byte(id))] = now.Add(s.ttl)
	return id, nil
}

// valid reports whether id is an open, unexpired session.
func (s *sessions) valid(id string) bool {
	if id == "" {
		return false
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.m[k]
	if ok && !s.now().Before(exp) {
		delete(s.m, k)
		return false
	}
	return ok
}

// drop closes a session.
func (s *sessions) drop(id string) {
	s.mu.Lock()
	delete(s.m, sha256.Sum256([]byte(id)))
	s.mu.Unlock()
}

func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// tokenRequired reports whether actions need a session.
func (d *Dashboard) tokenRequired() bool { return d.token != "" }

// authorized reports whether r may act: with a token, it carries an open
// session; without one, it comes from a loopback address.
func (d *Dashboard) authorized(r *http.Request) bool {
	if d.tokenRequired() {
		c, err := r.Cookie(sessionCookie)
		return err == nil && d.sessions.valid(c.Value)
	}
	return fromLoopback(r)
}

// tokenOK compares a token entered in the form with the admin token in
// constant time.
func (d *Dashboard) tokenOK(got string) bool {
	return d.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(d.token)) == 1
}

// fromLoopback reports whether r's client is on this machine
// (loopback.Client: the client's own address; the admin guard checks
// the Host of a request that arrived on either end, loopback.Request).
func fromLoopback(r *http.Request) bool { return loopback.Client(r) }

// setSession gives the browser its session cookie.
func (d *Dashboard) setSession(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/", MaxAge: int(d.sessions.ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// setFlash leaves a message for the next page the browser shows.
func setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(msg)), Path: "/", MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// takeFlash returns the message left by setFlash, and clears it.
func takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	msg, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(msg) > 500 {
		return ""
	}
	return string(msg)
}
