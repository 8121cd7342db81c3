package config

import (
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pacer-dev/pacer/notify/render"
)

// notifyWebhook reads notify.webhook: the webhook block deliver's webhooks
// have, plus body, a text/template over the event (contract 15.2) parsed
// and tried on a sample event here, so that a template that does not parse
// or names a field the event lacks is a problem with its path.
func (l *loader) notifyWebhook(n *yaml.Node, where path) (*Webhook, *render.Template) {
	d := deref(n)
	if d == nil || d.Kind != yaml.MappingNode {
		return l.webhook(n, where), nil
	}
	rest := *d
	rest.Content = nil
	var body *yaml.Node
	for i := 0; i+1 < len(d.Content); i += 2 {
		if k := d.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "body" {
			body = d.Content[i+1]
			continue
		}
		rest.Content = append(rest.Content, d.Content[i], d.Content[i+1])
	}
	w := l.webhook(&rest, where)
	if body == nil {
		return w, nil
	}
	bp := where.key("body")
	text, ok := l.scalar(body, bp, "a template (a string)")
	if !ok {
		return w, nil
	}
	tp, err := render.Parse(text)
	if err != nil {
		l.addf(bp, "%v", err)
		return w, nil
	}
	return w, tp
}

// remindEvery reads notify.remind_every: a duration >= 0 (0: no reminders).
func (l *loader) remindEvery(n *yaml.Node, where path) (v time.Duration) {
	d, ok := l.duration(n, where)
	if ok && d < 0 {
		l.addf(where, "must be >= 0 (0: no reminders)")
		return 0
	}
	return d
}
