package scheduler

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// logCapture is a slog.Handler that keeps every record, for tests that
// count log lines.
type logCapture struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newLogCapture() logCapture { return logCapture{mu: &sync.Mutex{}, recs: &[]slog.Record{}} }

func (c logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c logCapture) WithGroup(string) slog.Handler            { return c }

func (c logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.recs = append(*c.recs, r.Clone())
	return nil
}

// lines returns the records whose message is msg, each as its attributes.
func (c logCapture) lines(msg string) []map[string]string {
	var out []map[string]string
	for _, m := range c.all() {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// all returns every record, in order, each as its attributes with its
// message ("msg"), time and level.
func (c logCapture) all() []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]string
	for _, r := range *c.recs {
		m := map[string]string{"msg": r.Message, "time": r.Time.UTC().Format(time.RFC3339Nano), "level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.String()
			return true
		})
		out = append(out, m)
	}
	return out
}

// startWith is start with a logger and a poller factory.
func startWith(t *testing.T, dir string, cfg *config.Config, log *slog.Logger, newPoller func(src *config.Source) (sources.Poller, error)) *harness {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, store: st, reg: prometheus.NewRegistry()}
	h.s, err = New(cfg, Options{Store: st, Registry: h.reg, Logger: log, CommandInterval: 2 * time.Second, NewPoller: newPoller})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}
