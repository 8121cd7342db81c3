package config

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pacer-dev/pacer/notify/render"
)

// The notify section (contract 10.1 to 10.3): where the events of sources
// entering error, opening their breaker and recovering are sent. Wiring it
// into Load takes two lines elsewhere: a field `Notify *Notify` in Config,
// and in topKey `case "notify": cfg.Notify = l.notify(p.val)`.

// Notification events (contract 10.1).
const (
	EventError     = "error"
	EventOpen      = "open"
	EventRecovered = "recovered"
	// Host events (contract 13.7), in the default notify.on too.
	EventHostOpen      = "host_open"
	EventHostRecovered = "host_recovered"
)

// events is every event name, in the order of notify.on.
func events() []string {
	return []string{EventError, EventOpen, EventRecovered, EventHostOpen, EventHostRecovered}
}

// Defaults of the notify section.
const (
	DefaultNotifyTimeout = 10 * time.Second
	DefaultNotifyMaxAge  = 24 * time.Hour
)

// Notify is the notify section; Config.Notify is nil without one, and
// then no event is made at all.
type Notify struct {
	// On lists the events sent, each once, in the order error, open,
	// recovered.
	On []string
	// Command, when set, gets each event as JSON on stdin (argv, no
	// shell; Command[0] resolved as an exec source's).
	Command []string
	// Webhook, when set, gets each event as a JSON POST.
	Webhook *Webhook
	// WebhookBody, when set, is notify.webhook.body: the webhook's body
	// rendered from the event instead of the event JSON (contract 15.2).
	WebhookBody *render.Template
	// RemindEvery, when > 0, repeats an error event while its source stays
	// in error (contract 15.3).
	RemindEvery time.Duration
	// Timeout bounds one delivery to one target.
	Timeout time.Duration
	// MaxAge is how long an event is retried before it is dropped.
	MaxAge time.Duration
}

// Wants reports whether the section sends event. A nil section sends none.
func (n *Notify) Wants(event string) bool {
	return n != nil && slices.Contains(n.On, event)
}

// notify reads the notify section; at least one target is required.
func (l *loader) notify(n *yaml.Node) *Notify {
	out := &Notify{On: []string{EventError, EventRecovered, EventHostOpen, EventHostRecovered}, Timeout: DefaultNotifyTimeout, MaxAge: DefaultNotifyMaxAge}
	ps, _ := l.pairs(n, at("notify"))
	for _, p := range ps {
		kp := at("notify").key(p.key)
		switch p.key {
		case "on":
			out.On = l.notifyOn(p.val, kp)
		case "command":
			out.Command = l.command(p.val, kp)
		case "webhook":
			out.Webhook, out.WebhookBody = l.notifyWebhook(p.val, kp)
		case "remind_every":
			out.RemindEvery = l.remindEvery(p.val, kp)
		case "timeout":
			if v, ok := l.positiveDuration(p.val, kp); ok {
				out.Timeout = v
			}
		case "max_age":
			if v, ok := l.positiveDuration(p.val, kp); ok {
				out.MaxAge = v
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
	if len(out.Command) == 0 && out.Webhook == nil {
		l.addf(at("notify"), "needs a target: command, webhook or both")
	}
	return out
}

// notifyOn reads notify.on: a list of known events, in a fixed order.
func (l *loader) notifyOn(n *yaml.Node, where path) []string {
	items, ok := l.items(n, where)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		l.addf(where, "must list at least one of %s", strings.Join(events(), ", "))
	}
	seen := map[string]bool{}
	for i, it := range items {
		v, ok := l.scalar(it, where.index(i), "an event name")
		if !ok {
			continue
		}
		switch ev := strings.ToLower(strings.TrimSpace(v)); ev {
		case EventError, EventOpen, EventRecovered, EventHostOpen, EventHostRecovered:
			seen[ev] = true
		default:
			l.addf(where.index(i), "unknown event %q: want one of %s", v, strings.Join(events(), ", "))
		}
	}
	var on []string
	for _, ev := range events() {
		if seen[ev] {
			on = append(on, ev)
		}
	}
	return on
}
