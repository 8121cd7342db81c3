package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/store"
)

// commandWait is how long the CLI waits for a running daemon to apply a
// command it queued in the store.
const commandWait = 5 * time.Second

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
	owners, err := clusterOwners(cfg)
	if err != nil {
		return err
	}
	now := time.Now()
	view := statusView(cfg, states, owners, now)
	if only != nil {
		o := view(only)
		if *asJSON {
			return printJSON(env.Stdout, o)
		}
		owners.print(env.Stdout, []scheduler.Explained{o}, now)
		return nil
	}
	objs := make([]scheduler.Explained, 0, len(cfg.Sources))
	for i := range cfg.Sources {
		objs = append(objs, view(&cfg.Sources[i]))
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
func readStates(cfg *config.Config, only *config.Source) (map[string]store.SourceState, error) {
	st, err := openExisting(cfg)
	if err != nil || st == nil {
		return nil, err
	}
	defer st.Close()
	var states []store.SourceState
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
	byName := make(map[string]store.SourceState, len(states))
	for _, s := range states {
		byName[s.Name] = s
	}
	return byName, nil
}

// statusView returns the source object (with the explanation and owner)
// of a source from its stored state at now; a source never stored is
// pending. The daemon's queues are not in the store: Explain gets no
// QueueInfo.
func statusView(cfg *config.Config, byName map[string]store.SourceState, owners shardOwners, now time.Time) func(*config.Source) scheduler.Explained {
	redact := cfg.Redactor().Redact
	return func(src *config.Source) scheduler.Explained {
		s, ok := byName[src.Name]
		if !ok {
			s = store.SourceState{Name: src.Name}
		}
		o := scheduler.Explained{SourceObject: scheduler.View(src, &s, now, redact),
			Why: scheduler.Explain(src, &s, now, scheduler.QueueInfo{}, redact)}
		o.Owner = owners.of(src)
		return o
	}
}

// printStatusTable prints an aligned table a person can read at a glance.
func printStatusTable(w io.Writer, objs []scheduler.Explained, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tFAILURES\tNEXT RUN\tLAST ERROR\tWHY")
	for _, o := range objs {
		next := "-"
		if o.NextRunAt != nil {
			next = relative(o.NextRunAt.Sub(now))
		}
		lastErr := o.LastError
		if lastErr != "" && o.LastErrorAt != nil {
			// After a reset the state is ok beside the old error: say when.
			lastErr = "(" + ago(now.Sub(*o.LastErrorAt)) + ") " + lastErr
		}
		if o.ErrorReason != "" {
			lastErr = o.ErrorReason
		} else if o.PausedReason != "" {
			lastErr = "paused: " + o.PausedReason
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", o.Name, o.State, o.ConsecutiveFailures, next, clip(lastErr, 80), clip(o.Why, 80))
	}
	_ = tw.Flush() // writing to a closed stdout: nothing to do
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
	var recs []store.PollRecord
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
	}
	if *asJSON {
		if recs == nil {
			recs = []store.PollRecord{}
		}
		return printJSON(env.Stdout, recs)
	}
	printHistoryTable(env.Stdout, recs)
	return nil
}

// printHistoryTable prints poll records as an aligned table.
func printHistoryTable(w io.Writer, recs []store.PollRecord) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tOUTCOME\tDURATION\tCODE\tBYTES\tERROR")
	for _, r := range recs {
		code := "-"
		if r.StatusCode != nil {
			code = strconv.Itoa(*r.StatusCode)
		} else if r.ExitCode != nil {
			code = "exit " + strconv.Itoa(*r.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%dms\t%s\t%d\t%s\n", r.StartedAt.UTC().Format(time.RFC3339), r.Outcome,
			r.DurationMs, code, r.Bytes, clip(r.Error, 80))
	}
	_ = tw.Flush() // writing to a closed stdout: nothing to do
}

// cmdAction runs reset, pause, resume and trigger. With a daemon running
// on the store, the command is queued in the store and applied by the
// daemon (so the daemon never overwrites it); otherwise reset, pause and
// resume change the store directly.
func cmdAction(action string, args []string, env Env) (err error) {
	f := newFlags(action, env)
	defer f.redact(&err)
	var allErrored *bool
	var reason *string
	if action == scheduler.ActionReset {
		allErrored = f.Bool("all-errored", false, "reset every source in the error state")
	}
	if action == scheduler.ActionPause {
		reason = f.String("reason", "", "why the source is paused")
	}
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	all := allErrored != nil && *allErrored
	if err := checkActionArgs(action, pos, all); err != nil {
		return err
	}
	cfg, err := f.loadForStore(env)
	if err != nil {
		return err
	}
	for _, name := range pos {
		if _, ok := cfg.Source(name); !ok {
			return fmt.Errorf("unknown source %q", name)
		}
	}
	why := ""
	if reason != nil {
		why = *reason
	}
	st, pid, running, release, err := openForAction(cfg, action)
	if err != nil {
		return err
	}
	defer release()
	ctx := context.Background()
	if all {
		if pos, err = erroredSources(ctx, st, cfg); err != nil {
			return err
		}
		if len(pos) == 0 {
			fmt.Fprintln(env.Stdout, "no source is in error")
			return nil
		}
	}
	for _, name := range pos {
		if running {
			err = viaDaemon(ctx, st, pid, action, name, why)
		} else {
			err = direct(ctx, st, cfg, action, name, why)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s: %s\n", name, pastTense(action))
	}
	return nil
}

// checkActionArgs checks the names given to action (all: -all-errored).
func checkActionArgs(action string, pos []string, all bool) error {
	switch {
	case all && len(pos) > 0:
		return usagef("reset takes NAME... or -all-errored, not both")
	case all:
	case action == scheduler.ActionReset && len(pos) == 0:
		return usagef("reset needs NAME... or -all-errored")
	case action != scheduler.ActionReset && len(pos) != 1:
		return usagef("%s takes one NAME", action)
	}
	return nil
}

// openForAction opens cfg's store for action and says whether a daemon
// runs on it (and its pid). Without one it holds the daemon's lock while
// the store is changed, so that a daemon starting meanwhile cannot load a
// half-applied change; release closes the store and gives the lock back.
// A store deleted under (or after) a daemon is refused: a command must not
// create a new, empty one, which the running daemon would never read.
func openForAction(cfg *config.Config, action string) (st *store.Store, pid int, running bool, release func(), err error) {
	if err := store.Vanished(cfg.Store); err != nil {
		return nil, 0, false, nil, err
	}
	if pid, running, err = store.Holder(cfg.Store); err != nil {
		return nil, 0, false, nil, err
	}
	if !running && action == scheduler.ActionTrigger {
		return nil, 0, false, nil, fmt.Errorf("trigger needs a running daemon; none holds store %s", cfg.Redactor().Redact(cfg.Store))
	}
	var lock *store.Lock
	if !running {
		lock, err = store.AcquireLock(cfg.Store)
		var le *store.LockedError
		switch {
		case errors.As(err, &le):
			running, pid, lock = true, le.PID, nil
		case err != nil:
			return nil, 0, false, nil, err
		}
	}
	// The lock (when this command holds it) makes Open lock the database
	// file and refuse to create one where the lock file records a store.
	st, err = openStoreWith(cfg, store.Options{Lock: lock})
	if err != nil {
		if lock != nil {
			_ = lock.Release()
		}
		return nil, 0, false, nil, err
	}
	release = func() {
		_ = st.Close()
		if lock != nil {
			_ = lock.Release()
		}
	}
	return st, pid, running, release, nil
}

// erroredSources lists, sorted, the configured sources in the error state.
func erroredSources(ctx context.Context, st *store.Store, cfg *config.Config) ([]string, error) {
	states, err := st.LoadStates(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range states {
		if _, ok := cfg.Source(s.Name); ok && s.ErrorReason != "" {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

func pastTense(action string) string {
	switch action {
	case scheduler.ActionReset:
		return "reset"
	case scheduler.ActionTrigger:
		return "triggered"
	}
	return action + "d"
}

// viaDaemon queues the command for the running daemon and waits for it.
func viaDaemon(ctx context.Context, st *store.Store, pid int, action, name, reason string) error {
	c := &store.Command{Source: name, Action: action, Reason: reason}
	if err := st.EnqueueCommand(ctx, c); err != nil {
		return err
	}
	return awaitCommand(ctx, st, pid, c, commandWaits{apply: commandWait, settle: settleWait, poll: 50 * time.Millisecond})
}

// settleWait bounds how long the CLI waits, past commandWait, to learn the
// fate of a command: the result of one the daemon claimed, or a withdrawal
// that the store's write lock (held by another process) delays.
const settleWait = 30 * time.Second

// commandWaits are awaitCommand's bounds: apply for the daemon to take the
// command, settle beyond it, poll between reads.
type commandWaits struct{ apply, settle, poll time.Duration }

// awaitCommand waits for the daemon's result of the queued command c. A
// command ends in exactly one of two ways, and is reported so: applied
// (nil, or the daemon's refusal), or not applied. Past w.apply a command no
// daemon has claimed is withdrawn (store.ExpireCommand), and a daemon
// applies only what it claimed (store.ClaimCommand); the two conditional
// updates exclude each other, so when the withdrawal finds the command
// claimed, the daemon's result is awaited instead of reporting a failure.
func awaitCommand(ctx context.Context, st *store.Store, pid int, c *store.Command, w commandWaits) error {
	start := time.Now()
	deadline, hard := start.Add(w.apply), start.Add(w.apply+w.settle)
	var expireErr error
	for {
		got, err := st.GetCommand(ctx, c.ID)
		if err != nil {
			return err
		}
		now := time.Now()
		switch {
		case got.DoneAt != nil && got.Status == store.CommandExpired:
			return fmt.Errorf("%s %s was withdrawn (%s): it was not applied", c.Action, c.Source, got.Result)
		case got.DoneAt != nil && got.Result != "":
			return errors.New(got.Result)
		case got.DoneAt != nil:
			return nil
		case got.Status == store.CommandPending && now.After(deadline):
			ok, err := st.ExpireCommand(ctx, c.ID, fmt.Sprintf("expired: no daemon took it within %s", w.apply))
			if err == nil && ok {
				return fmt.Errorf("the running daemon (pid %d) did not take %s %s within %s: it was withdrawn and will not be applied",
					pid, c.Action, c.Source, w.apply)
			}
			// Claimed meanwhile (its result is awaited), or the store is
			// busy: a command still pending may yet be applied, so it is
			// not reported as failed.
			expireErr = err
		}
		if now.After(hard) {
			if expireErr != nil {
				return fmt.Errorf("%s %s: could not withdraw it from the store (%w): the daemon (pid %d) may still apply it; see pacer status %s",
					c.Action, c.Source, expireErr, pid, c.Source)
			}
			return fmt.Errorf("the running daemon (pid %d) took %s %s but did not report its result within %s; see pacer status %s",
				pid, c.Action, c.Source, w.apply+w.settle, c.Source)
		}
		t := time.NewTimer(w.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// direct applies the command to the store of a stopped daemon.
func direct(ctx context.Context, st *store.Store, cfg *config.Config, action, name, reason string) error {
	src, _ := cfg.Source(name)
	cur, ok, err := st.GetState(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		// No fingerprint: the one computed here may differ from the
		// daemon's (a variable or a PATH only the daemon has, see
		// config.Options.ForStore); the daemon takes its own for a row
		// without one rather than see a changed configuration.
		cur = store.SourceState{Name: name}
	}
	next, err := scheduler.ApplyAction(action, src, cur, reason, time.Now())
	if err != nil {
		return err
	}
	return st.SaveBatch(ctx, []store.SourceState{next}, nil, cfg.History.Keep)
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
