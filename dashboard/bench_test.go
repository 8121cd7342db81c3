package dashboard_test

import (
	"context"
	"fmt"
	"github.com/pacer-dev/pacer/scheduler/hosts"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/dashboard"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/rates"
	srcview "github.com/pacer-dev/pacer/scheduler/view"
)

// fakeController is a daemon of n sources held in memory, for the
// benchmark only (the handler tests use the real scheduler). Rows copies
// its slice per call, as the scheduler does.
type fakeController struct {
	rows  []srcview.Row
	objs  map[string]srcview.Explained
	hist  []domain.PollRecord
	rates []rates.Sample // a full hour
}

var _ dashboard.Controller = (*fakeController)(nil)

func newFake(n int) *fakeController {
	now := time.Now()
	states := policy.States()
	f := &fakeController{objs: make(map[string]srcview.Explained, n)}
	for i := range n {
		name := fmt.Sprintf("source-%06d", i)
		st := states[i%len(states)]
		next := now.Add(time.Duration(i%3600) * time.Second)
		last := now.Add(-time.Duration(i%600) * time.Second)
		f.rows = append(f.rows, srcview.Row{Name: name, Type: "http", State: st, Failures: i % 7, LastSuccess: last.UnixNano(), NextRun: next.UnixNano()})
		f.objs[name] = srcview.Explained{
			SourceObject: srcview.SourceObject{Name: name, Type: "http", Schedule: "@every 1m", State: st, ConsecutiveFailures: i % 7,
				Breaker: "closed", NextRunAt: &next, LastRunAt: &last, LastSuccessAt: &last,
				LastError: "GET https://example.com/" + name + ": 502 Bad Gateway"},
			Why: "backoff: failure 3 of 10, next attempt in 42 s",
		}
	}
	for i := range rates.Size {
		var smp rates.Sample
		smp.At, smp.Inflight, smp.Limit = now.Add(time.Duration(i-rates.Size)*rates.Every), i%17, 16
		smp.PerSecond[rates.Success], smp.PerSecond[rates.Failure] = float64(i%50), float64(i%7)
		f.rates = append(f.rates, smp)
	}
	for i := range 20 {
		rec := domain.PollRecord{StartedAt: now.Add(-time.Duration(i) * time.Minute), DurationMs: 120, Outcome: domain.OutcomeSuccess}
		if i%4 == 0 { // a quarter of the polls failed
			rec.Outcome, rec.Error = domain.OutcomeFailure, "GET https://example.com/x: 502 Bad Gateway"
		}
		f.hist = append(f.hist, rec)
	}
	return f
}

func (f *fakeController) Rows() []srcview.Row { return append([]srcview.Row(nil), f.rows...) }
func (f *fakeController) ExplainSources(names []string) []srcview.Explained {
	out := make([]srcview.Explained, 0, len(names))
	for _, n := range names {
		out = append(out, f.objs[n])
	}
	return out
}
func (f *fakeController) ExplainAll(fn func([]srcview.Explained) error) error {
	chunk := make([]srcview.Explained, 0, 1000)
	for _, r := range f.rows {
		if chunk = append(chunk, f.objs[r.Name]); len(chunk) == cap(chunk) {
			if err := fn(chunk); err != nil {
				return err
			}
			chunk = chunk[:0]
		}
	}
	return fn(chunk)
}
func (f *fakeController) ExplainSource(name string) (srcview.Explained, error) {
	return f.objs[name], nil
}
func (f *fakeController) SourceConfig(name string) (config.Source, *config.Redactor, error) {
	// 100 hosts, for the per-host shares: the name's last two digits.
	host := 0
	if k := len(name); k >= 2 {
		host = int(name[k-2]-'0')*10 + int(name[k-1]-'0')
	}
	return config.Source{Name: name, Type: "http", URL: fmt.Sprintf("https://h%02d.example.com/", host)}, nil, nil
}
func (f *fakeController) History(context.Context, string, int) ([]domain.PollRecord, error) {
	return f.hist, nil
}
func (f *fakeController) Histories(_ context.Context, names []string, _ int) (map[string][]domain.PollRecord, error) {
	out := make(map[string][]domain.PollRecord, len(names))
	for _, n := range names {
		out[n] = f.hist
	}
	return out, nil
}
func (f *fakeController) Reset(string) (srcview.SourceObject, error) {
	return srcview.SourceObject{}, nil
}
func (f *fakeController) Pause(string, string) (srcview.SourceObject, error) {
	return srcview.SourceObject{}, nil
}
func (f *fakeController) Resume(string) (srcview.SourceObject, error) {
	return srcview.SourceObject{}, nil
}
func (f *fakeController) Trigger(string) error        { return nil }
func (f *fakeController) Ready(context.Context) error { return nil }
func (f *fakeController) Load() (int, int)            { return 3, 16 }
func (f *fakeController) Rates() []rates.Sample       { return f.rates }
func (f *fakeController) Hosts() []hosts.Object       { return nil }

// BenchmarkDashboardPage renders pages of the table over 100,000 sources
// (contract 11.2: each answered within 200 ms), reporting the time per page
// and its weight. Nothing is asserted about the time.
func BenchmarkDashboardPage(b *testing.B) {
	const n = 100_000
	d, err := dashboard.New(newFake(n), dashboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	benchPages(b, d, []struct{ name, path string }{
		{"first", "/"},
		{"filter", "/?state=error"},
		{"search", "/?q=source-0999"},
		{"sort-next-page-1000", "/?sort=next&order=desc&page=1000"},
		{"live-fragment", "/dash/live?sort=name&page=2"},
	})
	b.Run("host-shares", func(b *testing.B) { // the background aggregate, once a minute at most
		for b.Loop() {
			if n := dashboard.ComputeHostShares(d); n != 100 {
				b.Fatalf("%d hosts, want 100", n)
			}
		}
	})
}

// benchPages times each page of pages on d, reporting its weight.
func benchPages(b *testing.B, d *dashboard.Dashboard, pages []struct{ name, path string }) {
	for _, c := range pages {
		b.Run(c.name, func(b *testing.B) {
			var size int
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodGet, c.path, nil)
				r.RemoteAddr = "127.0.0.1:1234"
				d.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", c.path, w.Code)
				}
				size = w.Body.Len()
				took = append(took, time.Since(start))
			}
			b.ReportMetric(float64(size), "bytes/page")
			// The median and the slowest: on a loaded machine the mean is
			// one page's stall spread over the others.
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
		})
	}
}
