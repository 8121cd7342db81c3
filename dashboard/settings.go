package dashboard

import (
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/policy"
	srcview "github.com/pacer-dev/pacer/scheduler/view"
)

// setting is one line of a source's settings, secrets masked.
type setting struct {
	Key, Value string
}

// settings lists a source's effective settings for its page. Header values
// are never shown (any of them may be a credential); every other text goes
// through redact, which masks the ${VAR} values and the other secrets.
func settings(src *config.Source, redact func(string) string) []setting {
	out := []setting{
		{"type", src.Type},
		{"schedule", redact(src.ScheduleSpec)},
		{"timeout", srcview.ShortDuration(src.Timeout)},
		{"backoff", fmt.Sprintf("initial %s, max %s, multiplier %g, jitter %g",
			srcview.ShortDuration(src.Backoff.Initial), srcview.ShortDuration(src.Backoff.Max), src.Backoff.Multiplier, src.Backoff.Jitter)},
	}
	if src.Breaker.Failures > 0 {
		out = append(out, setting{"breaker", fmt.Sprintf("opens after %d failures, cooldown %s", src.Breaker.Failures, srcview.ShortDuration(src.Breaker.Cooldown))})
	} else {
		out = append(out, setting{"breaker", "disabled"})
	}
	if src.ErrorAfter > 0 {
		out = append(out, setting{"error_after", strconv.Itoa(src.ErrorAfter) + " consecutive failures"})
	} else {
		out = append(out, setting{"error_after", "never"})
	}
	if src.ErrorReprobe > 0 {
		out = append(out, setting{"error_reprobe", "every " + srcview.ShortDuration(src.ErrorReprobe) + " while in error"})
	}
	if src.Limit != "" {
		out = append(out, setting{"limit", src.Limit})
	}
	out = append(out, sourceSettings(src, redact)...)
	out = append(out, conditionSettings(src, redact)...)
	return append(out, deliverSettings(src.Deliver, redact)...)
}

// sourceSettings are the settings of src's type.
func sourceSettings(src *config.Source, redact func(string) string) []setting {
	var out []setting
	switch src.Type {
	case "http":
		out = append(out, setting{"method", src.Method}, setting{"url", redact(src.URL)})
		for _, k := range slices.Sorted(maps.Keys(src.Headers)) {
			out = append(out, setting{"header " + k, "***"})
		}
		if src.Body != "" {
			out = append(out, setting{"body", shorten(redact(src.Body), 200)})
		}
		exp := "any 2xx"
		if len(src.ExpectStatus) > 0 {
			exp = strings.Trim(fmt.Sprint(src.ExpectStatus), "[]")
		}
		out = append(out, setting{"expect_status", exp}, setting{"max_body", humanBytes(src.MaxBody)})
		if src.FollowRedirects != nil && !*src.FollowRedirects {
			out = append(out, setting{"follow_redirects", "false"})
		}
		if src.Conditional != nil && !*src.Conditional {
			out = append(out, setting{"conditional", "false"})
		}
	case "exec":
		args := make([]string, len(src.Command))
		for i, a := range src.Command {
			args[i] = strconv.Quote(redact(a))
		}
		out = append(out, setting{"command", strings.Join(args, " ")})
		for _, k := range slices.Sorted(maps.Keys(src.Env)) {
			out = append(out, setting{"env " + k, redact(src.Env[k])})
		}
		if src.Dir != "" {
			out = append(out, setting{"dir", redact(src.Dir)})
		}
	}
	return out
}

// deliverSettings are the lines of a deliver block (none without one);
// webhook header values are never shown, as a source's.
func deliverSettings(d *config.Deliver, redact func(string) string) []setting {
	if d == nil {
		return nil
	}
	when := "changed results"
	if d.Always {
		when = "every result (GETs unconditional)"
	}
	out := []setting{{"deliver", when}}
	if d.File != "" {
		out = append(out, setting{"deliver file", redact(d.File)})
	}
	if len(d.Command) > 0 {
		args := make([]string, len(d.Command))
		for i, a := range d.Command {
			args[i] = strconv.Quote(redact(a))
		}
		out = append(out, setting{"deliver command", strings.Join(args, " ")})
	}
	if w := d.Webhook; w != nil {
		out = append(out, setting{"deliver webhook", w.Method + " " + redact(w.URL)})
		for _, k := range slices.Sorted(maps.Keys(w.Headers)) {
			out = append(out, setting{"deliver webhook header " + k, "***"})
		}
	}
	return out
}

// timeView is a time shown relative to now, with the exact time on hover.
type timeView struct {
	ISO  string // RFC 3339 UTC; "" = none
	Text string // "in 42 s", "3 min ago", "—"
}

// funcs are the templates' helpers.
func (d *Dashboard) funcs() template.FuncMap {
	return template.FuncMap{
		"when": func(t *time.Time) timeView {
			if t == nil || t.IsZero() {
				return timeView{Text: "—"}
			}
			return timeView{ISO: t.UTC().Format(time.RFC3339), Text: relativeTo(*t, d.now())}
		},
		"at": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"num": func(p *int) string {
			if p == nil {
				return ""
			}
			return strconv.Itoa(*p)
		},
		"states":    func() []string { s := policy.States(); return s[:] },
		"refreshMs": func() int64 { return d.refresh.Milliseconds() },
	}
}

// relativeTo is t relative to now: "in 42 s", "3 min ago", "now".
func relativeTo(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return "in " + srcview.Relative(d)
	}
	return srcview.Relative(-d) + " ago"
}
