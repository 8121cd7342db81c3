package notify

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pendingGauge is the value of pacer_notifications_pending.
func pendingGauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "pacer_notifications_pending" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no pacer_notifications_pending")
	return 0
}

// TestPendingFollowsOutboxWithoutNotify: the notify section is removed (a
// reload) while the last event is in delivery; the delivery completes and
// pacer_notifications_pending returns to 0, as the outbox does (contract
// 10.1, 10.5): the gauge follows the outbox whatever the section.
func TestPendingFollowsOutboxWithoutNotify(t *testing.T) {
	st := openStore(t)
	commitEvents(t, st, []string{"a"}, 1)
	rc := &receiver{hold: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	n := webhookNotify(srv.URL)
	n.Timeout = 30 * time.Second
	s, reg := startSender(t, st, n)
	waitUntil(t, "the event in delivery, counted", 10*time.Second, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.cur == 1 && pendingGauge(t, reg) == 1
	})
	s.SetConfig(nil, nil)
	close(rc.hold)
	waitUntil(t, "the event delivered", 10*time.Second, func() bool {
		n, err := st.PendingEvents(t.Context())
		return err == nil && n == 0 && counter(t, reg, "sent") == 1
	})
	waitUntil(t, "pacer_notifications_pending back to 0", 10*time.Second, func() bool { return pendingGauge(t, reg) == 0 })
}
