package scheduler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/conditions"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
)

// BenchmarkConditionsPoll compares the CPU of a poll of a 10 KiB JSON
// body (over loopback HTTP/1.1, client and server in this process) with
// three conditions and a select against the same poll without them
// (contract 14, target <= 1.4x).
//
//	go test ./scheduler -run '^$' -bench BenchmarkConditionsPoll -benchtime=5000x -count 3
func BenchmarkConditionsPoll(b *testing.B) {
	var items []string
	for i := range 100 {
		items = append(items, fmt.Sprintf(`{"id":%d,"name":"item %d","price":%d.5,"tags":["a","b"]}`, i, i, i))
	}
	body := `{"status":"ok","generated_at":"2026-12-07T12:00:00Z","items":[` + strings.Join(items, ",") + `]}`
	body += strings.Repeat(" ", max(0, 10<<10-len(body)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	b.Cleanup(srv.Close)
	tr := sources.NewTransports(4)
	b.Cleanup(tr.CloseIdleConnections)
	client := sources.NewClient(tr, nil)
	set, probs := conditions.NewCompiler(nil).Compile(conditions.HTTP,
		[]string{`status == 200`, `duration < duration("2s")`, `body.json.status == "ok"`}, `body.json.items.map(i, i.id)`)
	if len(probs) > 0 {
		b.Fatal(probs)
	}
	for _, c := range []struct {
		name string
		set  *conditions.Set
	}{{"none", nil}, {"three-conditions-and-select", set}} {
		b.Run(c.name, func(b *testing.B) {
			off := false
			src := &config.Source{Name: "a", Type: "http", URL: srv.URL, Method: "GET", MaxBody: 10 << 20, Timeout: 10 * time.Second,
				Conditional: &off, Checks: c.set}
			p := sources.NewHTTP(src, client, nil)
			id := func(s string) string { return s }
			b.ReportAllocs()
			c0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				res, _, _ := call(b.Context(), src, p, sources.Validators{}, nil, nil, time.Now, id)
				if res.Err != nil || res.Digest == "" {
					b.Fatalf("%+v", res)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-c0)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is this process's CPU time (user + system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
