//go:build faults

package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The answered polls a member drops by design, as its log names them: the
// polls of a fenced commit refused because another member took the shard
// over after the member's claim lapsed (rule 8.3: their states must not
// overwrite the new owner's), and the polls a graceful stop cut off (rule
// 3.8: interrupted, counted as nothing). The upstream saw them and the
// store does not count them; a loss is explained by these lines only when
// one names that source's poll.

// Messages and fields of the log lines that name dropped polls
// (scheduler/droplog.go).
const (
	dropRefusedMsg = `msg="cluster: commits refused for shards no longer held; their sources wait for the store's owner"`
	dropRefusedKey = "dropped"
	dropCutMsg     = `msg="shutdown timeout: cancelling polls in flight"`
	dropCutKey     = "cut_off"
)

// crashDropped is, per source, the polls the members' logs name as dropped
// (refused commits, "name:polls") or cut off at a stop ("name").
func crashDropped(logs []string) map[string]int {
	out := map[string]int{}
	for _, text := range logs {
		for _, l := range strings.Split(text, "\n") {
			switch {
			case strings.Contains(l, dropRefusedMsg):
				for _, item := range strings.Fields(logField(l, dropRefusedKey)) {
					name, n, ok := strings.Cut(item, ":")
					if k, err := strconv.Atoi(n); ok && err == nil && k > 0 {
						out[name] += k
					}
				}
			case strings.Contains(l, dropCutMsg):
				for _, name := range strings.Fields(logField(l, dropCutKey)) {
					out[name]++
				}
			}
		}
	}
	return out
}

// logField is the value of key in a line of slog's text format (unquoted),
// "" when absent.
func logField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		q, err := strconv.QuotedPrefix(v)
		if err != nil {
			return ""
		}
		s, _ := strconv.Unquote(q)
		return s
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// crashDropLines is the log lines that name dropped or cut-off polls, of
// every member, at most max of them (the evidence behind crashDropped).
func crashDropLines(logs []string, max int) []string {
	var out []string
	for _, text := range logs {
		for _, l := range faultGrep(text, max, dropRefusedMsg, dropCutMsg) {
			if len(out) < max {
				out = append(out, l)
			}
		}
	}
	return out
}

// crashLossDetail describes, for a source with a poll missing from the
// store, the upstream's arrivals that no stored record matches (a record
// starts before its request arrives, by up to the daemon's lag), among
// those since the oldest record kept, each with the kills around it: the
// evidence of which poll was lost and when.
func crashLossDetail(in *inst, name string, arr []faultArrival, kills []crashKill) string {
	r, err := faultCLI(in, 30*time.Second, "history", name, "-json", "-n", "100")
	if err != nil || r.code != 0 {
		return fmt.Sprintf("history failed: %v %s", err, r)
	}
	var recs []histRec
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) == 0 {
		return fmt.Sprintf("history: %v (%d records)", err, len(recs))
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].StartedAt.Before(recs[j].StartedAt) })
	var b strings.Builder
	fmt.Fprintf(&b, "  %d records kept, from %s", len(recs), recs[0].StartedAt.Local().Format("15:04:05.000"))
	used := make([]bool, len(recs))
	for _, a := range arr {
		if a.At.Before(recs[0].StartedAt) {
			continue
		}
		found := false
		for i, h := range recs {
			if !used[i] && !h.StartedAt.Before(a.At.Add(-2*time.Second)) && !h.StartedAt.After(a.At.Add(50*time.Millisecond)) {
				used[i], found = true, true
				break
			}
		}
		if found {
			continue
		}
		fmt.Fprintf(&b, "\n  arrival %s (done %s) has no record; kills around it:", a.At.Format("15:04:05.000"), a.Done.Format("15:04:05.000"))
		for _, k := range kills {
			if d := k.at.Sub(a.At); d > -time.Second && d < 5*time.Second {
				fmt.Fprintf(&b, " %s at %s (owned it: %v)", k.victim, k.at.Format("15:04:05.000"), k.owned[name])
			}
		}
	}
	return b.String()
}

// crashWarnings counts the members' warning and error lines by message:
// how often claims lapsed, shards moved and commits were refused.
func crashWarnings(logs []string) string {
	n := map[string]int{}
	for _, text := range logs {
		for _, l := range strings.Split(text, "\n") {
			if !strings.Contains(l, "level=WARN") && !strings.Contains(l, "level=ERROR") {
				continue
			}
			msg := logField(l, "msg")
			if len(msg) > 80 {
				msg = msg[:80]
			}
			n[msg]++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %5d %s", n[k], k)
	}
	return b.String()
}
