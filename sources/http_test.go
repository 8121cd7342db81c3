package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// newServer starts a loopback server closed at the end of the test.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newTestClient returns a client over its own transport, whose idle
// connections are closed at the end of the test.
func newTestClient(t *testing.T, maxConns int) *http.Client {
	t.Helper()
	tr := NewTransport(maxConns)
	t.Cleanup(tr.CloseIdleConnections)
	return NewClient(tr, nil)
}

func httpSource(url string) *config.Source {
	return &config.Source{Name: "web", Type: "http", URL: url, Method: "GET", Timeout: 5 * time.Second, MaxBody: 10 << 20}
}

func TestHTTPStatus(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if ra := r.URL.Query().Get("retry"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		var code int
		fmt.Sscan(r.URL.Query().Get("code"), &code)
		w.WriteHeader(code)
		io.WriteString(w, "hello")
	})
	client := newTestClient(t, 4)
	tests := []struct {
		code       int
		retryAfter string
		expect     []int
		err        string // after "GET <url>: "; "" = success
		throttled  bool
	}{
		{code: 200},
		{code: 201},
		{code: 204},
		{code: 299},
		{code: 204, expect: []int{204}},
		{code: 200, expect: []int{204}, err: "200 OK"},
		{code: 302, err: "302 Found"},
		{code: 404, err: "404 Not Found"},
		{code: 502, err: "502 Bad Gateway"},
		{code: 500, expect: []int{200, 500}},
		{code: 429, err: "429 Too Many Requests", throttled: true},
		{code: 429, retryAfter: "120", err: "429 Too Many Requests", throttled: true},
		{code: 503, retryAfter: "Wed, 21 Oct 2015 07:28:00 GMT", err: "503 Service Unavailable", throttled: true},
		{code: 503, err: "503 Service Unavailable"},
		// An explicitly expected status is a success, even 429.
		{code: 429, expect: []int{200, 429}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.code, tt.expect, tt.retryAfter), func(t *testing.T) {
			q := url.Values{"code": {fmt.Sprint(tt.code)}}
			if tt.retryAfter != "" {
				q.Set("retry", tt.retryAfter)
			}
			src := httpSource(srv.URL + "/x?" + q.Encode())
			src.ExpectStatus = tt.expect
			res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second)
			want := "<nil>"
			if tt.err != "" {
				want = "GET " + src.URL + ": " + tt.err
			}
			if got := errText(res.Err); got != want {
				t.Errorf("Err = %q, want %q", got, want)
			}
			wantRes := Result{Err: res.Err, Throttled: tt.throttled, RetryAfter: tt.retryAfter, StatusCode: tt.code, ExitCode: -1, Bytes: 5}
			if tt.code == http.StatusNoContent {
				wantRes.Bytes = 0
			}
			if tt.err == "" { // a success has the digest of its body
				wantRes.Digest = sha([]byte("hello")[:wantRes.Bytes])
			}
			if res.Answer == nil {
				t.Errorf("an answer's Result has no Answer")
			}
			res.Answer = nil
			if res != wantRes {
				t.Errorf("got %+v, want %+v", res, wantRes)
			}
		})
	}
}

func TestHTTPFailureText(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	})
	src := httpSource(srv.URL + "/x")
	res, _ := pollWithin(t, NewHTTP(src, newTestClient(t, 1), nil), 5*time.Second)
	want := "GET http://" + srv.Listener.Addr().String() + "/x: 502 Bad Gateway"
	if errText(res.Err) != want {
		t.Errorf("Err = %q, want %q", errText(res.Err), want)
	}
}

func TestHTTPMaxBody(t *testing.T) {
	const limit = 1000
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		w.Write(make([]byte, n))
	})
	client := newTestClient(t, 1)
	for _, n := range []int{0, limit - 1, limit, limit + 1, 100 * limit} {
		src := httpSource(fmt.Sprintf("%s/x?n=%d", srv.URL, n))
		src.MaxBody = limit
		res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second)
		want, wantBytes := "<nil>", int64(n)
		if n > limit {
			want = fmt.Sprintf("GET %s: response body exceeds max_body (1000 bytes)", src.URL)
			wantBytes = limit + 1
		}
		if errText(res.Err) != want || res.Bytes != wantBytes || res.StatusCode != 200 {
			t.Errorf("n=%d: got %+v (%s), want Err %q, Bytes %d", n, res, errText(res.Err), want, wantBytes)
		}
	}
}

func TestHTTPEndlessBodyStopsAtLimit(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	src := httpSource(srv.URL + "/stream")
	src.MaxBody = 10 << 20
	res, took := pollWithin(t, NewHTTP(src, newTestClient(t, 1), nil), 30*time.Second)
	want := "GET " + src.URL + ": response body exceeds max_body (10485760 bytes)"
	if errText(res.Err) != want || res.Bytes != 10<<20+1 {
		t.Errorf("got %+v (%s), want %q", res, errText(res.Err), want)
	}
	if took > 10*time.Second {
		t.Errorf("took %v", took)
	}
}

func TestHTTPTimeout(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/partial" {
			w.Write([]byte("some"))
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	})
	client := newTestClient(t, 2)
	for _, path := range []string{"/headers", "/partial"} {
		src := httpSource(srv.URL + path)
		src.Timeout = 300 * time.Millisecond
		res, took := pollWithin(t, NewHTTP(src, client, nil), src.Timeout)
		want := "GET " + src.URL + ": timeout after 300ms"
		if errText(res.Err) != want || !errors.Is(res.Err, context.DeadlineExceeded) {
			t.Errorf("%s: Err = %q (deadline exceeded: %v), want %q", path, errText(res.Err), errors.Is(res.Err, context.DeadlineExceeded), want)
		}
		if took > 3*time.Second {
			t.Errorf("%s: took %v", path, took)
		}
	}
}

func TestHTTPCancel(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan Result)
	go func() { done <- NewHTTP(httpSource(srv.URL+"/x"), newTestClient(t, 1), nil).Poll(ctx) }()
	<-arrived
	cancel()
	select {
	case res := <-done:
		if !errors.Is(res.Err, context.Canceled) || errors.Is(res.Err, context.DeadlineExceeded) {
			t.Errorf("Err = %q, want a cancellation", errText(res.Err))
		}
		if want := "GET " + srv.URL + "/x: canceled"; errText(res.Err) != want {
			t.Errorf("Err = %q, want %q", errText(res.Err), want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("poll did not return after cancel")
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	src := httpSource("http://" + addr + "/x")
	res, _ := pollWithin(t, NewHTTP(src, newTestClient(t, 1), nil), 5*time.Second)
	want := "GET http://" + addr + "/x: dial tcp " + addr + ": connect: connection refused"
	if errText(res.Err) != want || res.StatusCode != 0 || res.Throttled {
		t.Errorf("got %+v, Err %q, want %q", res, errText(res.Err), want)
	}
}

func TestHTTPRequest(t *testing.T) {
	type seen struct{ method, host, ctype, token, body string }
	got := make(chan seen, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Host, r.Header.Get("Content-Type"), r.Header.Get("X-Token"), string(body)}
	})
	src := httpSource(srv.URL + "/x")
	src.Method = "POST"
	src.Body = `{"a":1}`
	src.Headers = map[string]string{"content-type": "application/json", "X-Token": "abc", "Host": "example.test"}
	res, _ := pollWithin(t, NewHTTP(src, newTestClient(t, 1), nil), 5*time.Second)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := seen{"POST", "example.test", "application/json", "abc", `{"a":1}`}
	if s := <-got; s != want {
		t.Errorf("server saw %+v, want %+v", s, want)
	}

	// No body and no method: a GET without a body.
	src = httpSource(srv.URL + "/x")
	src.Method = ""
	if res, _ := pollWithin(t, NewHTTP(src, newTestClient(t, 1), nil), 5*time.Second); res.Err != nil {
		t.Fatal(res.Err)
	}
	if s := <-got; s.method != "GET" || s.body != "" || s.host != srv.Listener.Addr().String() {
		t.Errorf("server saw %+v", s)
	}
}

func TestHTTPRedirects(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		if r.URL.Path == "/loop" || n > 0 {
			http.Redirect(w, r, fmt.Sprintf("%s?n=%d", r.URL.Path, n-1), http.StatusFound)
		}
	})
	client := newTestClient(t, 1)
	res, _ := pollWithin(t, NewHTTP(httpSource(srv.URL+"/loop"), client, nil), 5*time.Second)
	if want := "GET " + srv.URL + "/loop: stopped after 10 redirects"; errText(res.Err) != want {
		t.Errorf("loop: Err = %q, want %q", errText(res.Err), want)
	}
	if res, _ := pollWithin(t, NewHTTP(httpSource(srv.URL+"/x?n=10"), client, nil), 5*time.Second); res.Err != nil {
		t.Errorf("10 redirects: %v", res.Err)
	}
	res, _ = pollWithin(t, NewHTTP(httpSource(srv.URL+"/x?n=11"), client, nil), 5*time.Second)
	if want := "GET " + srv.URL + "/x?n=11: stopped after 10 redirects"; errText(res.Err) != want {
		t.Errorf("11 redirects: Err = %q, want %q", errText(res.Err), want)
	}
}

func TestHTTPSecretsRedacted(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	client := newTestClient(t, 2)
	for _, base := range []string{srv.URL + "/bad", srv.URL + "/slow", refused, "http://bad host/"} {
		src := httpSource(base + "?token=s3cr3t")
		src.Headers = map[string]string{"Authorization": "Bearer s3cr3t"}
		src.Timeout = 200 * time.Millisecond
		res, _ := pollWithin(t, NewHTTP(src, client, maskSecret), src.Timeout)
		text := errText(res.Err)
		if res.Err == nil || strings.Contains(text, "s3cr3t") || !strings.Contains(text, "token=***") {
			t.Errorf("%s: Err = %q", base, text)
		}
	}
}

func TestHTTPConnectionReuse(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusBadGateway)
		}
		w.Write(make([]byte, 4<<10))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client := newTestClient(t, 4)
	ok := NewHTTP(httpSource(srv.URL+"/ok"), client, nil)
	bad := NewHTTP(httpSource(srv.URL+"/bad"), client, nil)

	for i := range 200 {
		p := ok
		if i%4 == 0 {
			p = bad // failures drain their body too
		}
		if res, _ := pollWithin(t, p, 5*time.Second); (res.Err == nil) != (p == ok) {
			t.Fatalf("poll %d: %v", i, res.Err)
		}
	}
	if n := conns.Load(); n > 2 {
		t.Errorf("200 sequential polls opened %d connections", n)
	}

	// At full concurrency the connections stay within the cap.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if res, _ := pollWithin(t, ok, 5*time.Second); res.Err != nil {
					t.Error(res.Err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := conns.Load(); n > 4 {
		t.Errorf("polls at concurrency 8 over NewTransport(4) opened %d connections", n)
	}
}
