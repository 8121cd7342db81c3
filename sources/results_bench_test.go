package sources

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// cpuNow is this process's CPU time (user + system).
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPollResult compares the CPU of an unchanged poll answered 304
// (a conditional GET) with a 200 of a 10 KiB body (read and digested), and
// a 200 of the same body without the conditional request (conditional:
// false), and a 200 of 1 KiB (issue 15's poll), all over loopback HTTP/1.1 keep-alive. cpu-µs/op is the process's
// CPU per poll, client and server together (both run in this process).
//
//	go test ./sources -run '^$' -bench BenchmarkPollResult -benchtime=20000x
func BenchmarkPollResult(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 640) // 10 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.URL.Query().Get("size") == "1k" {
			_, _ = w.Write(body[:1<<10])
			return
		}
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	tr := NewTransports(4) // as the scheduler sends
	b.Cleanup(tr.CloseIdleConnections)
	client := NewClient(tr, nil)
	off := false
	for _, c := range []struct {
		name        string
		conditional *bool
		want        int
		query       string
	}{{"304", nil, 304, ""}, {"200-10KiB", &off, 200, ""}, {"200-1KiB", &off, 200, "?size=1k"}} {
		b.Run(c.name, func(b *testing.B) {
			src := httpSource(srv.URL + c.query)
			src.Conditional = c.conditional
			p := NewHTTP(src, client, nil).(ConditionalPoller)
			v := Validators{ETag: `"v1"`}
			b.ReportAllocs()
			c0 := cpuNow(b)
			b.ResetTimer()
			for range b.N {
				res := p.PollSince(b.Context(), v)
				if res.Err != nil || res.StatusCode != c.want {
					b.Fatalf("%+v", res)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuNow(b)-c0)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}
