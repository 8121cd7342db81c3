package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/scheduler/hosts"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// cmdHosts is `pacer hosts`: the host groups of contract section 13 as the
// store holds them (state, limits, learned limits, why), read without a
// daemon like status.
func cmdHosts(args []string, env Env) (err error) {
	f := newFlags("hosts", env)
	defer f.redact(&err)
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("hosts takes no NAME")
	}
	cfg, err := f.loadForStore(env)
	if err != nil {
		return err
	}
	tab, err := storedHosts(cfg)
	if err != nil {
		return err
	}
	objs := tab.Objects(time.Now())
	if *asJSON {
		if objs == nil {
			objs = []hosts.Object{}
		}
		return printJSON(env.Stdout, objs)
	}
	if len(objs) == 0 {
		fmt.Fprintln(env.Stdout, "no host groups: the config has no hosts: section, or no http source")
		return nil
	}
	printHosts(env.Stdout, objs, time.Now())
	return nil
}

// storedHosts is cfg's host room as the store holds it (none before the
// store exists).
func storedHosts(cfg *config.Config) (*hosts.Table, error) {
	log := slog.New(slog.DiscardHandler)
	if !cfg.Hosts.Present {
		return scheduler.OfflineHosts(cfg, nil, log), nil
	}
	st, err := openExisting(cfg)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return scheduler.OfflineHosts(cfg, nil, log), nil
	}
	defer st.Close()
	hs, err := st.LoadHosts(context.Background())
	if err != nil {
		return nil, err
	}
	return scheduler.OfflineHosts(cfg, hs, log), nil
}

// printHosts prints the host groups as an aligned table.
func printHosts(w io.Writer, objs []hosts.Object, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "HOST\tSOURCES\tSTATE\tUNTIL\tCONCURRENCY\tRATE\tLEARNED\t")
	for _, o := range objs {
		until := "-"
		if o.Until != nil {
			until = relative(o.Until.Sub(now))
		}
		learned := "-"
		if o.LearnedConcurrency != nil {
			learned = fmt.Sprintf("%d at once", *o.LearnedConcurrency)
		}
		if o.LearnedRate != nil {
			learned += fmt.Sprintf(" %.3g/s", *o.LearnedRate)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%.3g/s\t%s\t\n", o.Host, o.Sources, o.State, until, o.Concurrency, o.Rate, learned)
	}
	_ = tw.Flush()
	for _, o := range objs {
		if o.State != hosts.StateClosed {
			fmt.Fprintf(w, "%s: %s\n", o.Host, clip(o.Why, 110))
		}
	}
}

// blockedView sets o's state to blocked, with the reason in its why, when
// the stored states say its host or a dependency blocks it (contract
// 13.4): what the daemon would decide at its next due time.
func blockedView(o *view.Explained, src *config.Source, tab *hosts.Table, look func(string) (view.Dep, bool), now time.Time) {
	if o.State == "paused" || o.State == "error" {
		return
	}
	why := ""
	if src.Host != "" {
		if g := tab.Peek(src.Host, now); g.Blocked {
			why = g.Reason
		}
	}
	if why == "" {
		why = view.DependencyBlock(src.Name, src.DependsOn, look)
	}
	if why != "" {
		o.State, o.Why = "blocked", "blocked: "+why
	}
}
