package notify

import "github.com/pacer-dev/pacer/notify/render"

// webhookBody is the body of j's webhook request and its Content-Type:
// notify.webhook.body rendered on the event (contract 15.2), else the event
// JSON. A template that fails at run time (a value it cannot render, a body
// over render.MaxBody) sends the event JSON instead and logs why: the event
// is never dropped for its template.
func (s *Sender) webhookBody(j job, eventJSON []byte) ([]byte, string) {
	tp := j.set.n.WebhookBody
	if tp == nil {
		return eventJSON, "application/json"
	}
	b, err := tp.Render(render.DataOf(j.ev))
	if err != nil {
		s.log.Warn("notify.webhook.body failed on an event; sending the event JSON instead",
			"source", j.ev.Source, "event", j.ev.Event, "id", j.ev.ID, "err", j.set.redact.Redact(err.Error()))
		return eventJSON, "application/json"
	}
	return b, render.ContentType(b)
}
