package scheduler

import (
	"strconv"
	"strings"

	"github.com/pacer-dev/pacer/scheduler/flush"
)

// The log lines that name the answered polls a member drops or cuts off:
// a fenced commit refused (the shard is another member's: the polls ended
// after the member's claim lapsed are dropped with their states, by design,
// rule 8.3), and a shutdown that cuts off the polls in flight (recorded as
// interrupted, which counts as nothing, rule 3.8). Without the names, a
// poll the upstream answered and the store does not count could not be told
// from a lost one.

// maxNamed bounds the sources one log line names; the rest are counted.
const maxNamed = 20

// droppedList is the "name:polls" list of the refused sources whose
// writes carried poll records, the first maxNamed of them, with the number
// of such sources left out and the total of polls dropped.
func droppedList(refused []flush.Refused) (list string, more, polls int) {
	var b strings.Builder
	named := 0
	for _, r := range refused {
		if r.Polls == 0 {
			continue
		}
		polls += r.Polls
		if named == maxNamed {
			more++
			continue
		}
		if named > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.Name)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(r.Polls))
		named++
	}
	return b.String(), more, polls
}

// nameList is the first maxNamed of names, space-separated, and the number
// left out.
func nameList(names []string) (list string, more int) {
	if len(names) > maxNamed {
		more = len(names) - maxNamed
		names = names[:maxNamed]
	}
	return strings.Join(names, " "), more
}

// claimedNames is the names of the sources with a poll in flight (claimed).
// mu held.
func (w *workers) claimedNames() []string {
	var names []string
	w.q.EachClaimed(func(e *entry) { names = append(names, e.name) })
	return names
}
