package sources

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// upstream is a loopback server with one document that honours
// If-None-Match and If-Modified-Since with 304 (through net/http's
// ServeContent rules), counting the 304s it sent and the requests that
// carried a validator.
type upstream struct {
	body         atomic.Pointer[[]byte]
	etag         atomic.Value // string; "" for none
	modified     time.Time
	notModified  atomic.Int64
	conditionals atomic.Int64
	requests     atomic.Int64
}

func newUpstream(t *testing.T, body string, etag string) (*upstream, string) {
	u := &upstream{modified: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	u.set(body, etag)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
			u.conditionals.Add(1)
		}
		if e := u.etag.Load().(string); e != "" {
			w.Header().Set("ETag", e)
		}
		rec := &statusRecorder{ResponseWriter: w}
		http.ServeContent(rec, r, "", u.modified, bytes.NewReader(*u.body.Load()))
		if rec.code == http.StatusNotModified {
			u.notModified.Add(1)
		}
	})
	return u, srv.URL
}

func (u *upstream) set(body, etag string) {
	b := []byte(body)
	u.body.Store(&b)
	u.etag.Store(etag)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// TestConditionalGet: a 200 returns the body's digest and its validators;
// sent back, they get a 304, which is a success, NotModified, without a
// digest; a new ETag gets a 200 again. Conditional off, another method, or
// the source's own If-None-Match send no validator of pacer's; a 304 to an
// unconditional request is judged by expect_status.
func TestConditionalGet(t *testing.T) {
	u, url := newUpstream(t, "v1", `"e1"`)
	client := newTestClient(t, 2)
	p := NewHTTP(httpSource(url), client, nil).(ConditionalPoller)

	res := p.PollSince(t.Context(), Validators{})
	if res.Err != nil || res.StatusCode != 200 || res.NotModified || res.Digest != sha([]byte("v1")) ||
		res.ETag != `"e1"` || res.LastModified != "Tue, 01 Dec 2026 10:00:00 GMT" {
		t.Fatalf("first poll: %+v (%s)", res, errText(res.Err))
	}
	v := Validators{ETag: res.ETag, LastModified: res.LastModified}
	res = p.PollSince(t.Context(), v)
	if res.Err != nil || res.StatusCode != 304 || !res.NotModified || res.Digest != "" || res.ETag != "" {
		t.Fatalf("conditional poll: %+v (%s), want a successful 304", res, errText(res.Err))
	}
	if u.notModified.Load() != 1 || u.conditionals.Load() != 1 {
		t.Errorf("upstream: %d 304s, %d conditional requests; want 1 and 1", u.notModified.Load(), u.conditionals.Load())
	}
	// Only Last-Modified: still a 304.
	if res = p.PollSince(t.Context(), Validators{LastModified: v.LastModified}); !res.NotModified {
		t.Errorf("If-Modified-Since alone: %+v, want a 304", res)
	}
	u.set("v2", `"e2"`)
	res = p.PollSince(t.Context(), v)
	if res.Err != nil || res.StatusCode != 200 || res.NotModified || res.Digest != sha([]byte("v2")) || res.ETag != `"e2"` {
		t.Errorf("after a change: %+v (%s), want a 200 with the new digest and ETag", res, errText(res.Err))
	}

	off := false
	for name, src := range map[string]func() Poller{
		"conditional: false": func() Poller { s := httpSource(url); s.Conditional = &off; return NewHTTP(s, client, nil) },
		"POST":               func() Poller { s := httpSource(url); s.Method = "POST"; return NewHTTP(s, client, nil) },
		"own If-None-Match": func() Poller {
			s := httpSource(url)
			s.Headers = map[string]string{"If-None-Match": `"other"`}
			return NewHTTP(s, client, nil)
		},
	} {
		before := u.notModified.Load()
		res := src().(ConditionalPoller).PollSince(t.Context(), Validators{ETag: `"e2"`})
		if res.NotModified || res.StatusCode != 200 || res.Digest != sha([]byte("v2")) || u.notModified.Load() != before {
			t.Errorf("%s: %+v (%s), want an unconditional 200", name, res, errText(res.Err))
		}
	}

	// A 304 that pacer did not ask for (the source's own header) is a
	// status like any: a failure unless expect_status lists it.
	s := httpSource(url)
	s.Headers = map[string]string{"If-None-Match": `"e2"`}
	if res := NewHTTP(s, client, nil).Poll(t.Context()); res.Err == nil || res.NotModified {
		t.Errorf("own conditional header, 304: %+v, want a failure", res)
	}
	s.ExpectStatus = []int{304}
	if res := NewHTTP(s, client, nil).Poll(t.Context()); res.Err != nil || res.NotModified || res.Digest != sha(nil) {
		t.Errorf("own conditional header, 304 expected: %+v (%s), want a success with the empty body's digest", res, errText(res.Err))
	}
}

// TestDigestWhileStreaming: a body of several MiB is digested as it is
// read (the digest of the whole); a body over max_body has no digest; a
// failed status has none either.
func TestDigestWhileStreaming(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	_, url := newUpstream(t, string(big), "")
	client := newTestClient(t, 2)
	res := NewHTTP(httpSource(url), client, nil).Poll(t.Context())
	if res.Err != nil || res.Bytes != int64(len(big)) || res.Digest != sha(big) || res.ETag != "" {
		t.Errorf("3 MiB body: bytes %d digest %s etag %q (%s); want %d, %s", res.Bytes, res.Digest, res.ETag, errText(res.Err), len(big), sha(big))
	}
	s := httpSource(url)
	s.MaxBody = 1 << 20
	if res := NewHTTP(s, client, nil).Poll(t.Context()); res.Err == nil || res.Digest != "" {
		t.Errorf("over max_body: %+v, want a failure without digest", res)
	}
	s = httpSource(url)
	s.ExpectStatus = []int{201}
	if res := NewHTTP(s, client, nil).Poll(t.Context()); res.Err == nil || res.Digest != "" {
		t.Errorf("unexpected status: %+v, want a failure without digest", res)
	}
}

// TestExecDigest: an exec source's stdout is digested (stderr is not); a
// different output gives a different digest; a failure has none.
func TestExecDigest(t *testing.T) {
	for _, c := range []struct{ script, arg, want string }{
		{`printf "$1"; echo noise >&2`, "a", sha([]byte("a"))},
		{`printf "$1"; echo other >&2`, "a", sha([]byte("a"))},
		{`printf "$1"`, "b", sha([]byte("b"))},
		{`head -c 1048576 /dev/zero`, "", sha(make([]byte, 1<<20))},
		{`printf "$1"; exit 3`, "a", ""},
	} {
		res, _ := pollWithin(t, NewExec(shell(c.script, c.arg), nil), 10*time.Second)
		if res.Digest != c.want {
			t.Errorf("%s (%s): digest %q, want %q", c.script, c.arg, res.Digest, c.want)
		}
	}
}
