//go:build faults

package e2e

import (
	"strconv"
	"strings"
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
