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

// crashUnmatched returns the upstream's arrivals on name that no stored
// record matches (a record starts before its request arrives, by up to the
// daemon's lag), among those since the oldest record kept (history keeps
// 100), and a note when the history cannot be read.
func crashUnmatched(in *inst, name string, arr []faultArrival) ([]faultArrival, string) {
	r, err := faultCLI(in, 30*time.Second, "history", name, "-json", "-n", "100")
	if err != nil || r.code != 0 {
		return nil, fmt.Sprintf("history failed: %v %s", err, r)
	}
	var recs []histRec
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) == 0 {
		return nil, fmt.Sprintf("history: %v (%d records)", err, len(recs))
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].StartedAt.Before(recs[j].StartedAt) })
	used := make([]bool, len(recs))
	var out []faultArrival
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
		if !found {
			out = append(out, a)
		}
	}
	return out, fmt.Sprintf("%d records kept, from %s", len(recs), recs[0].StartedAt.Local().Format("15:04:05.000"))
}

// crashWhy classifies an arrival on name missing from the store: a request
// a killed member sent before it was stopped (sentBy), else by the first
// kill at or after it of a member that owned name then: within the
// test's window (the poll answered at most crashKill.window before it, or
// in flight), beyond it (with the victim's measured wait for a CPU
// between the answer and the kill), or none
// within 5 s.
func crashWhy(name string, a faultArrival, kills []crashKill) (class, detail string) {
	for _, k := range kills {
		if k.sentBy(a) {
			return "sent by a member before it was stopped, got here after its kill", ""
		}
	}
	for _, k := range kills {
		if !k.owned[name] || k.at.Before(a.At) || k.at.Sub(a.At) > 5*time.Second {
			continue
		}
		if a.Done.IsZero() || !a.Done.Before(k.at) {
			return "in flight at a kill of its owner", ""
		}
		window := k.window(a)
		gap := k.at.Sub(a.Done)
		if gap <= window {
			return "answered within the window before a kill of its owner", ""
		}
		var cpu time.Duration
		if k.runq != nil {
			cpu = k.runq.between(a.Done, k.at)
		}
		return "answered beyond the window before a kill of its owner", fmt.Sprintf("%s: answered %s, %s killed %s later (window %s; its threads waited %s for a CPU meanwhile, PostgreSQL's most-starved process %s)",
			name, a.Done.Format("15:04:05.000"), k.victim, gap.Round(time.Millisecond), window.Round(time.Millisecond), cpu.Round(time.Millisecond),
			k.pg.maxBetween(a.Done, k.at).Round(time.Millisecond))
	}
	return "no kill of its owner within 5 s", fmt.Sprintf("%s: request %s, answered %s", name, a.At.Format("15:04:05.000"), a.Done.Format("15:04:05.000"))
}

// crashLossDetail describes, for a source with a poll missing from the
// store, the arrivals no record matches and why each may be missing.
func crashLossDetail(in *inst, name string, arr []faultArrival, kills []crashKill) string {
	un, note := crashUnmatched(in, name, arr)
	var b strings.Builder
	fmt.Fprintf(&b, "  %s", note)
	for _, a := range un {
		class, detail := crashWhy(name, a, kills)
		fmt.Fprintf(&b, "\n  arrival %s (answered %s) has no record: %s %s", a.At.Format("15:04:05.000"), a.Done.Format("15:04:05.000"), class, detail)
	}
	return b.String()
}

// crashLossSummary classifies the arrivals missing from the store of up to
// limit http sources of each kind with polls missing (crashWhy), with the
// details of those outside the test's kill window: the evidence of where
// polls are lost on a loaded machine, also in a run whose counts pass.
func crashLossSummary(in *inst, srcs []crashSrc, fu *faultUpstream, kills []crashKill, final map[string]sourceObj, limit int) string {
	classes := map[string]int{}
	var details []string
	checked, ofKind := 0, map[string]int{}
	for _, s := range srcs {
		arr := fu.Arrivals(s.path)
		if !s.isHTTP() || len(arr) <= int(final[s.name].PollsTotal) || ofKind[s.kind] == limit {
			continue
		}
		checked++
		ofKind[s.kind]++
		un, _ := crashUnmatched(in, s.name, arr)
		for _, a := range un {
			class, detail := crashWhy(s.name, a, kills)
			classes[class+" ("+s.kind+")"]++
			if detail != "" && len(details) < 40 {
				details = append(details, detail)
			}
		}
	}
	keys := make([]string, 0, len(classes))
	for k := range classes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d sources with polls missing looked at", checked)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %4d %s", classes[k], k)
	}
	for _, d := range details {
		fmt.Fprintf(&b, "\n    %s", d)
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
