package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

// noteNoDaemon says on w when no daemon holds cfg's store: the table's
// "due now" then means "when a daemon starts", since nothing polls. A
// failure to tell is not said: the table is still right.
func noteNoDaemon(w io.Writer, cfg *config.Config) {
	if _, held, err := store.Holder(cfg.Store); err == nil && !held {
		fmt.Fprintf(w, "pacer: no daemon holds store %s: nothing is polled until one starts (the times below are those stored)\n",
			escapeControls(cfg.Redactor().Redact(store.ShownDSN(cfg.Store))))
	}
}

// statusWidth is the width the status table keeps within (a terminal of
// 120 columns): the LAST ERROR and WHY columns share what the others leave.
const statusWidth = 120

// statusGap is the space between two columns of the status table.
const statusGap = 2

// printStatusTable prints the status table of a daemon without a cluster
// (statusTable).
func printStatusTable(w io.Writer, objs []view.Explained, now time.Time) {
	statusTable(w, objs, now, false)
}

// statusTable prints an aligned table a person can read at a glance:
// one row per source, the OWNER column on a cluster (withOwner), FAILS
// (consecutive failures) right-aligned under its header; short headers,
// so that the texts have the room. LAST ERROR says the last error and how
// long ago it was; WHY says the rest (a pause, the error state), without
// repeating the last error.
func statusTable(w io.Writer, objs []view.Explained, now time.Time, withOwner bool) {
	head := []string{"NAME", "STATE", "FAILS", "NEXT RUN", "LAST ERROR", "WHY"}
	if withOwner {
		head = append([]string{"NAME", "OWNER"}, head[1:]...)
	}
	rows := [][]string{head}
	for _, o := range objs {
		rows = append(rows, statusRow(o, now, withOwner))
	}
	fitStatusRows(rows)
	tw := tabwriter.NewWriter(w, 0, 0, statusGap, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush() // writing to a closed stdout: nothing to do
}

// statusRow is the cells of o's row; the last two are not yet clipped to
// the table's width (nor their control characters escaped: clip does).
func statusRow(o view.Explained, now time.Time, withOwner bool) []string {
	next := "-"
	if o.NextRunAt != nil {
		next = relative(o.NextRunAt.Sub(now))
	}
	lastErr, why := o.LastError, o.Why
	if lastErr != "" {
		// The error state's reason quotes the last error: said once.
		why = strings.Replace(why, "; last: "+lastErr, "", 1)
		if o.LastErrorAt != nil {
			// After a reset the state is ok beside the old error: say when.
			lastErr = "(" + ago(now.Sub(*o.LastErrorAt)) + ") " + lastErr
		}
	}
	row := []string{clip(o.Name, 40)}
	if withOwner {
		owner := "-"
		if o.Owner != nil {
			owner = *o.Owner
		}
		row = append(row, clip(owner, 20))
	}
	failures := fmt.Sprintf("%*d", len("FAILS"), o.ConsecutiveFailures)
	return append(row, o.State, failures, next, lastErr, why)
}

// fitStatusRows clips the last two columns (LAST ERROR, WHY) of rows so
// that the table fits statusWidth: each gets what it needs when both fit,
// else WHY (derived from the state) two fifths of the room left and LAST
// ERROR (the data) three fifths; a column that needs less than its share
// leaves the rest to the other.
func fitStatusRows(rows [][]string) {
	n := len(rows[0])
	width := make([]int, n)
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(escapeControls(c)))
		}
	}
	room := statusWidth - statusGap
	for _, w := range width[:n-2] {
		room -= w + statusGap
	}
	errW, whyW := width[n-2], width[n-1]
	if errW+whyW > room {
		whyW = max(min(whyW, max(room*2/5, room-errW)), 16)
		errW = max(room-whyW, 16)
	}
	for _, r := range rows[1:] {
		r[n-2], r[n-1] = clip(r[n-2], errW), clip(r[n-1], whyW)
	}
}

// rightAlign pads the cells of the columns cols of rows (the header
// included) on the left to the column's width, so that a table printed
// left-aligned shows those numbers right-aligned under their headers.
func rightAlign(rows [][]string, cols ...int) {
	for _, c := range cols {
		width := 0
		for _, r := range rows {
			width = max(width, utf8.RuneCountInString(r[c]))
		}
		for _, r := range rows {
			r[c] = strings.Repeat(" ", width-utf8.RuneCountInString(r[c])) + r[c]
		}
	}
}
