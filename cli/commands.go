package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/hosts"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

func cmdStatus(args []string, env Env) (err error) {
	f := newFlags("status", env)
	defer f.redact(&err)
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("status takes at most one NAME")
	}
	cfg, err := f.loadForStore(env)
	if err != nil {
		return err
	}
	var only *config.Source
	if len(pos) == 1 {
		src, ok := cfg.Source(pos[0])
		if !ok {
			return fmt.Errorf("unknown source %q", pos[0])
		}
		only = src
	}
	states, err := readStates(cfg, only)
	if err != nil {
		return err
	}
	if !*asJSON {
		noteNoDaemon(env.Stderr, cfg)
	}
	owners, err := clusterOwners(cfg)
	if err != nil {
		return err
	}
	now := time.Now()
	tab, err := storedHosts(cfg)
	if err != nil {
		return err
	}
	viewOf := withBlocks(statusView(cfg, states, owners, now), tab, storedDeps(cfg, states, tab, now), now)
	if only != nil {
		o := viewOf(only)
		if *asJSON {
			return printJSON(env.Stdout, o)
		}
		owners.print(env.Stdout, []view.Explained{o}, now)
		return nil
	}
	objs := make([]view.Explained, 0, len(cfg.Sources))
	for i := range cfg.Sources {
		objs = append(objs, viewOf(cfg.Sources[i]))
	}
	if *asJSON {
		return printJSON(env.Stdout, objs)
	}
	owners.print(env.Stdout, objs, now)
	return nil
}

// openExisting opens cfg's store to read it, or returns nil when there is
// none yet. Before any daemon has created the store there is nothing to
// read (and a store created here, by root say, might not be writable by
// the service); a store deleted after a daemon ran on it is not read as
// empty: that is said.
func openExisting(cfg *config.Config) (*store.Store, error) {
	if err := store.Vanished(cfg.Store); err != nil {
		return nil, err
	}
	if store.Missing(cfg.Store) {
		return nil, nil
	}
	return openStore(cfg)
}

// readStates reads the stored states of every source, or of only, by name
// (none before the store exists: openExisting).
func readStates(cfg *config.Config, only *config.Source) (map[string]domain.SourceState, error) {
	st, err := openExisting(cfg)
	if err != nil || st == nil {
		return nil, err
	}
	defer st.Close()
	var states []domain.SourceState
	if only != nil {
		// One source: one row, not the whole table.
		s, found, err := st.GetState(context.Background(), only.Name)
		if err != nil {
			return nil, err
		}
		if found {
			states = append(states, s)
		}
	} else if states, err = st.LoadStates(context.Background()); err != nil {
		return nil, err
	}
	byName := make(map[string]domain.SourceState, len(states))
	for _, s := range states {
		byName[s.Name] = s
	}
	return byName, nil
}

// statusView returns the source object (with the explanation and owner)
// of a source from its stored state at now; a source never stored is
// pending. The daemon's queues are not in the store: Explain gets no
// QueueInfo.
func statusView(cfg *config.Config, byName map[string]domain.SourceState, owners shardOwners, now time.Time) func(*config.Source) view.Explained {
	redact := cfg.Redactor().Redact
	return func(src *config.Source) view.Explained {
		s, ok := byName[src.Name]
		if !ok {
			s = domain.SourceState{Name: src.Name}
		}
		o := view.Explained{SourceObject: view.ViewIn(cfg, src, &s, now, redact),
			Why: view.ExplainIn(cfg, src, &s, now, view.QueueInfo{}, redact)}
		o.Owner = owners.of(src)
		return o
	}
}

// storedDeps looks a source up for view.DependencyBlock from the stored
// states and host states.
func storedDeps(cfg *config.Config, states map[string]domain.SourceState, tab *hosts.Table, now time.Time) func(string) (view.Dep, bool) {
	return func(name string) (view.Dep, bool) {
		src, ok := cfg.Source(name)
		if !ok {
			return view.Dep{}, false
		}
		s := states[name]
		d := view.Dep{State: policy.StateOf(&s, now), DependsOn: src.DependsOn}
		if src.Host != "" {
			if g := tab.Peek(src.Host, now); g.Blocked {
				d.HostBlock = g.Reason
			}
		}
		return d, true
	}
}

// withBlocks is viewOf with each source's block applied (blockedView).
func withBlocks(viewOf func(*config.Source) view.Explained, tab *hosts.Table, look func(string) (view.Dep, bool), now time.Time) func(*config.Source) view.Explained {
	return func(src *config.Source) view.Explained {
		o := viewOf(src)
		blockedView(&o, src, tab, look, now)
		return o
	}
}

// relative renders a duration as "in 42s", "in 3m", or "now" (overdue).
func relative(d time.Duration) string {
	if d <= 0 {
		return "now"
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("in %ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("in %dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("in %dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("in %dd", int(d/(24*time.Hour)))
}

// ago renders how long ago something happened: "12s ago", "3m ago",
// "5h02m ago", "4d ago".
func ago(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm ago", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

func cmdHistory(args []string, env Env) (err error) {
	f := newFlags("history", env)
	defer f.redact(&err)
	n := f.Int("n", 20, "number of records")
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("history takes one NAME")
	}
	if *n < 1 {
		return usagef("-n must be at least 1")
	}
	cfg, err := f.loadForStore(env)
	if err != nil {
		return err
	}
	if _, ok := cfg.Source(pos[0]); !ok {
		return fmt.Errorf("unknown source %q", pos[0])
	}
	var recs []domain.PollRecord
	st, err := openExisting(cfg)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
		// The store may briefly hold a few more than history.keep records.
		if recs, err = st.History(context.Background(), pos[0], min(*n, cfg.History.Keep)); err != nil {
			return err
		}
	}
	redact := cfg.Redactor().Redact
	for i := range recs {
		recs[i].Error = redact(recs[i].Error)
		recs[i].Condition = redact(recs[i].Condition)
	}
	if *asJSON {
		if recs == nil {
			recs = []domain.PollRecord{}
		}
		return printJSON(env.Stdout, recs)
	}
	printHistoryTable(env.Stdout, recs)
	return nil
}

// printHistoryTable prints poll records as an aligned table.
func printHistoryTable(w io.Writer, recs []domain.PollRecord) {
	rows := [][]string{{"STARTED", "OUTCOME", "DURATION", "CODE", "BYTES", "CONDITION", "ERROR"}}
	for _, r := range recs {
		code := "-"
		if r.StatusCode != nil {
			code = strconv.Itoa(*r.StatusCode)
		} else if r.ExitCode != nil {
			code = "exit " + strconv.Itoa(*r.ExitCode)
		}
		cond := "-"
		if r.Condition != "" {
			cond = clip(r.Condition, 40)
		}
		rows = append(rows, []string{r.StartedAt.UTC().Format(time.RFC3339), r.Outcome,
			strconv.FormatInt(r.DurationMs, 10) + "ms", code, strconv.FormatInt(r.Bytes, 10), cond, clip(r.Error, 80)})
	}
	rightAlign(rows, 2, 3, 4)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush() // writing to a closed stdout: nothing to do
}

func openStore(cfg *config.Config) (*store.Store, error) {
	return openStoreWith(cfg, store.Options{})
}

func openStoreWith(cfg *config.Config, opts store.Options) (*store.Store, error) {
	st, err := store.Open(cfg.Store, opts)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Redactor().Redact(cfg.Store), err)
	}
	return st, nil
}

// printJSON prints v as indented JSON, exact but safe on a terminal
// (admin.EscapeJSON).
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = w.Write(append(admin.EscapeJSON(b), '\n'))
	return err
}
