// Package render turns a notification event into the body of a webhook
// request through a user's Go text/template (notify.webhook.body, contract
// 15.2), for receivers that want their own shape: a chat service's
// {"text": ...}, a pager's fields, ntfy's plain text. It is a leaf package
// (domain only) so that config can check a template at load and the
// notifier render it at delivery with the same data and functions.
package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// MaxBody bounds a rendered body: a template that loops over its input
// cannot make a request of unbounded size.
const MaxBody = 1 << 20

// Data is what a template sees: the fields of the event JSON (contract
// 10.1) under their Go names, and Reminder. Nothing else of the outbox row
// (attempts, claims) is visible, so a template naming it fails at load.
type Data struct {
	ID                  string
	Event               string
	Source              string
	Host                string
	State               string
	PreviousState       string
	Reason              string
	ConsecutiveFailures int
	At                  time.Time
	Reminder            bool
}

// DataOf is the template data of ev (At in UTC, as the event JSON has it).
func DataOf(ev domain.Event) Data {
	return Data{
		ID: ev.ID, Event: ev.Event, Source: ev.Source, Host: ev.Host, State: ev.State, PreviousState: ev.PreviousState,
		Reason: ev.Reason, ConsecutiveFailures: ev.ConsecutiveFailures, At: ev.At.UTC(), Reminder: ev.Reminder,
	}
}

// Template is a parsed body template, safe for concurrent use.
type Template struct {
	t *template.Template
	// Text is the template as written.
	Text string
}

// funcs are the functions a template may call: json quotes any value as
// JSON (a string as a JSON string with its quotes, newlines and
// non-ASCII escaped as JSON requires).
func funcs() template.FuncMap {
	return template.FuncMap{"json": jsonValue}
}

// jsonValue is the json function: v encoded as JSON, HTML characters left
// as they are (a chat message shows "<" rather than "\u003c").
func jsonValue(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("json: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// sample is the event a template is tried on at load: every field set,
// with a reason holding what quoting must survive.
func sample() Data {
	return Data{
		ID: "0123456789abcdef0123456789abcdef", Event: "error", Source: "sample", Host: "example.com:8443",
		State: "error", PreviousState: "backoff", Reason: "5 consecutive failures: \"quoted\"\nnon-ASCII é",
		ConsecutiveFailures: 5, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Reminder: true,
	}
}

// Parse parses text and executes it once on a sample event, so that a
// syntax error and a field the event does not have ({{.Foo}}) are both
// found when the config is loaded. The error does not repeat the text.
func Parse(text string) (*Template, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("empty template")
	}
	t, err := template.New("body").Option("missingkey=error").Funcs(funcs()).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template does not parse: %w", err)
	}
	tp := &Template{t: t, Text: text}
	if _, err := tp.Render(sample()); err != nil {
		return nil, fmt.Errorf("template fails on a sample event: %w", err)
	}
	return tp, nil
}

// Render executes the template on d. A body over MaxBody is an error.
func (tp *Template) Render(d Data) ([]byte, error) {
	var b limited
	if err := tp.t.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	return b.Bytes(), nil
}

// ContentType is the Content-Type of a rendered body: application/json
// when it is valid JSON (a chat service's payload), else text/plain (ntfy
// and other receivers of plain text, which a JSON type would mislead).
func ContentType(body []byte) string {
	if json.Valid(body) {
		return "application/json"
	}
	return "text/plain; charset=utf-8"
}

// limited is a buffer that refuses to grow past MaxBody.
type limited struct{ bytes.Buffer }

// errTooLarge is a rendered body over MaxBody.
var errTooLarge = fmt.Errorf("body larger than %d bytes", MaxBody)

func (l *limited) Write(p []byte) (int, error) {
	if l.Len()+len(p) > MaxBody {
		return 0, errTooLarge
	}
	return l.Buffer.Write(p)
}
