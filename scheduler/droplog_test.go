package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/flush"
)

// refusedLine is the message of the log line that names the polls a
// refused fenced commit dropped.
const refusedLine = "cluster: commits refused for shards no longer held; their sources wait for the store's owner"

// TestRefusedCommitNamesDroppedPolls: a poll that ended while its member
// could not commit, on a shard another member took over meanwhile, is
// dropped with its state when the fenced commit is refused (rule 8.3); the
// member's log names it, also when the member had given the shard up
// before the refusal (the line used to count shards lost by the refusal
// only, and said nothing then).
func TestRefusedCommitNamesDroppedPolls(t *testing.T) {
	ctx := t.Context()
	st := openPG(t)
	a, b := newClusterMember(t, st, "a"), newClusterMember(t, st, "b")
	if err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sources:\n  - {name: x, type: exec, command: [\"true\"], "+yearly+"}\n")
	own := gate(a)
	logs := newLogCapture()
	s, err := New(cfg, Options{Store: st, Registry: prometheus.NewRegistry(), Ownership: own,
		CommandInterval: 50 * time.Millisecond, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(5 * time.Second); err != nil {
			t.Error(err)
		}
	})
	sh := domain.ShardOf("x", "")
	waitUntil(t, "x's shard taken over", 10*time.Second, func() bool { return s.polls(sh) && s.Drained(sh) })

	own.held.Store(true) // the poll's state and record wait in the flusher
	if err := s.Trigger("x"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "x polled", 10*time.Second, func() bool {
		o, err := s.Source("x")
		return err == nil && o.PollsTotal == 1 && !s.busyNow("x")
	})
	own.deny(sh, true) // its claim ends: the member gives the shard up first
	waitUntil(t, "x's shard given up", 10*time.Second, func() bool { return !s.polls(sh) })
	if err := st.LeaveCluster(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := b.Round(ctx); err != nil { // b takes the shard
		t.Fatal(err)
	}
	own.held.Store(false)
	waitUntil(t, "the poll committed or refused", 15*time.Second, func() bool { return s.Drained(sh) })
	if got, _, err := st.GetState(ctx, "x"); err != nil || got.PollsTotal != 0 {
		t.Fatalf("stored x: polls %d, err %v; want the commit refused", got.PollsTotal, err)
	}
	lines := logs.lines(refusedLine)
	if len(lines) != 1 || lines[0]["dropped"] != "x:1" || lines[0]["polls_dropped"] != "1" || lines[0]["shards"] != "0" {
		t.Errorf("log lines about refused commits: %v; want one naming x's dropped poll (x:1)", lines)
	}
}

// droppedList names the first maxNamed sources with dropped polls and
// counts the rest; a refused state without a record is not a dropped poll.
func TestDroppedListBounded(t *testing.T) {
	var refused []flush.Refused
	want := make([]string, 0, maxNamed)
	for i := range maxNamed + 3 {
		name := fmt.Sprintf("s%02d", i)
		refused = append(refused, flush.Refused{Name: name, Polls: 1 + i%2}, flush.Refused{Name: "bare" + name})
		if i < maxNamed {
			want = append(want, fmt.Sprintf("%s:%d", name, 1+i%2))
		}
	}
	list, more, polls := droppedList(refused)
	if list != strings.Join(want, " ") || more != 3 || polls != (maxNamed+3)+(maxNamed+3)/2 {
		t.Errorf("droppedList: %q, %d more, %d polls; want %q, 3 more, %d polls", list, more, polls,
			strings.Join(want, " "), (maxNamed+3)+(maxNamed+3)/2)
	}
	if list, more := nameList([]string{"a", "b"}); list != "a b" || more != 0 {
		t.Errorf("nameList: %q, %d more", list, more)
	}
}
