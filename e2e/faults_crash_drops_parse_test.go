//go:build faults

package e2e

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"testing"
	"time"
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

// tcpEnds finds the connection a request came over among the sockets of
// the process that sent it (this one), and sentBy attributes the request
// to a kill of that process only when it got to the handler after the kill.
func TestCrashSentByConnection(t *testing.T) {
	fu := newFaultUpstream(t)
	resp, err := http.Get(fu.URL("/ok/x"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	ends, err := tcpEnds(os.Getpid()) // the connection is kept alive
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	arr := fu.Arrivals("/ok/x")
	if len(arr) != 1 {
		t.Fatalf("arrivals %v", arr)
	}
	a := arr[0]
	before := crashKill{at: a.At.Add(-time.Millisecond), conns: ends}
	if !before.sentBy(a) {
		t.Errorf("request from %s, this process's sockets %v: not attributed to it", a.From, ends)
	}
	if after := (crashKill{at: a.At.Add(time.Millisecond), conns: ends}); after.sentBy(a) {
		t.Error("a request got before the kill attributed by its connection")
	}
	if other := (crashKill{at: before.at, conns: map[netip.AddrPort]bool{}}); other.sentBy(a) {
		t.Error("a request attributed to a process without its connection")
	}
	if late := (crashKill{at: a.At.Add(-crashHandlerLag - time.Millisecond), conns: ends}); late.sentBy(a) {
		t.Error("a request got more than crashHandlerLag after the kill attributed to it")
	}
	if final := (crashKill{at: before.at, conns: ends, final: true}); final.sentBy(a) {
		t.Error("a request attributed to the read of a member's connections before the final stop, which is no kill")
	}
	kills := []crashKill{{victim: "other", conns: map[netip.AddrPort]bool{}}, {victim: "me", conns: ends}}
	if got := crashSender(a, kills); got != "me" {
		t.Errorf("crashSender = %q; want me", got)
	}
	if got := crashBefore(arr, -1, kills); got != "none" {
		t.Errorf("crashBefore(-1) = %q", got)
	}
}
