package deliver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
)

// cpuNow is this process's CPU time (user + system).
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeliverFile measures what deliver.file adds to a changed
// result: a poll of a 10 KiB body over loopback HTTP/1.1 keep-alive, read
// and digested (plain), against the same poll keeping the body and
// writing it to a file atomically (temp file, write, fsync, rename, fsync
// of the directory). cpu-µs/op is the process's CPU per poll, client and
// server together; ns/op includes the fsyncs' wait.
//
//	go test ./deliver -run '^$' -bench BenchmarkDeliverFile -benchtime=3000x
func BenchmarkDeliverFile(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 640) // 10 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	tr := sources.NewTransport(4)
	b.Cleanup(tr.CloseIdleConnections)
	client := sources.NewClient(tr, nil)
	dl := New(nil)
	for _, withFile := range []bool{false, true} {
		name := "plain"
		if withFile {
			name = "deliver.file"
		}
		b.Run(name, func(b *testing.B) {
			src := &config.Source{Name: "web", Type: "http", URL: srv.URL, Method: "GET", Timeout: 5 * time.Second, MaxBody: 1 << 20}
			d := &config.Deliver{File: filepath.Join(b.TempDir(), "out", "web.json")}
			if withFile {
				src.Deliver = d
			}
			p := sources.NewHTTP(src, client, nil)
			b.ReportAllocs()
			c0 := cpuNow(b)
			b.ResetTimer()
			for range b.N {
				res := p.Poll(b.Context())
				if res.Err != nil {
					b.Fatal(res.Err)
				}
				if withFile {
					err := dl.Deliver(b.Context(), d, Result{Source: "web", Digest: res.Digest, Status: res.StatusCode, Body: res.Body}, nil)
					res.Body.Close()
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuNow(b)-c0)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}
