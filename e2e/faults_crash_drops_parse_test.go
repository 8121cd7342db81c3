//go:build faults

package e2e

import (
	"bytes"
	"log/slog"
	"reflect"
	"testing"
)

// crashDropped reads the lines slog's text handler writes: one name
// unquoted, several quoted, none empty; other lines count for nothing.
func TestCrashDroppedParses(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewTextHandler(&b, nil))
	refused := "cluster: commits refused for shards no longer held; their sources wait for the store's owner"
	log.Warn(refused, "sources", 1, "shards", 0, "polls_dropped", 1, "dropped", "thrd-003:1", "dropped_more", 0)
	log.Warn(refused, "sources", 3, "shards", 1, "polls_dropped", 3, "dropped", "thr-001:2 failx-010:1", "dropped_more", 0)
	log.Warn(refused, "sources", 2, "shards", 1, "polls_dropped", 0, "dropped", "", "dropped_more", 0)
	log.Warn("shutdown timeout: cancelling polls in flight", "timeout", "5s", "cut_off", "hang-001 thr-001", "cut_off_more", 0)
	log.Info("cluster: shards given up", "dropped", "ok-001:1")
	got := crashDropped([]string{b.String()})
	want := map[string]int{"thrd-003": 1, "thr-001": 3, "failx-010": 1, "hang-001": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("crashDropped = %v; want %v\nfrom:\n%s", got, want, b.String())
	}
	if n := len(crashDropLines([]string{b.String()}, 3)); n != 3 {
		t.Errorf("crashDropLines kept %d lines; want 3 (the bound)", n)
	}
}
