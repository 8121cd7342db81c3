package render

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// tricky is a reason with what quoting must survive: quotes, a backslash,
// newlines, a tab, non-ASCII, HTML characters and a control character.
const tricky = "HTTP 500: \"down\" \\ <b>x</b> & y\nline 2\r\n\ttabbed, café ✓ 日本 \x01"

func trickyEvent() domain.Event {
	return domain.Event{ID: "abc", Event: "error", Source: "api-\"1\"", State: "error", PreviousState: "backoff",
		Reason: tricky, ConsecutiveFailures: 3, At: time.Date(2026, 12, 7, 2, 30, 0, 0, time.FixedZone("X", 3600))}
}

// TestSlackShapeQuotes: a {"text": ...} body with json quoting is valid
// JSON whose text decodes back to exactly the reason, whatever it holds.
func TestSlackShapeQuotes(t *testing.T) {
	tp, err := Parse(`{"text": {{json (printf "%s is %s: %s" .Source .State .Reason)}}, "id": {{json .ID}}, "n": {{.ConsecutiveFailures}}, "reminder": {{.Reminder}}}`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tp.Render(DataOf(trickyEvent()))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Text, ID string
		N        int
		Reminder bool
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	if want := `api-"1" is error: ` + tricky; got.Text != want || got.ID != "abc" || got.N != 3 || got.Reminder {
		t.Fatalf("decoded %+v, want text %q", got, want)
	}
	if ContentType(b) != "application/json" {
		t.Fatalf("content type %q", ContentType(b))
	}
	if strings.Contains(string(b), `\u003c`) {
		t.Fatalf("HTML escaped: %s", b)
	}
}

// TestPlainShape: an ntfy-style plain body keeps the text as it is and is
// sent as text/plain; At is in UTC.
func TestPlainShape(t *testing.T) {
	tp, err := Parse(`{{.Source}} is {{.State}} since {{.At.Format "15:04"}}: {{.Reason}}`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tp.Render(DataOf(trickyEvent()))
	if err != nil {
		t.Fatal(err)
	}
	if want := `api-"1" is error since 01:30: ` + tricky; string(b) != want {
		t.Fatalf("body %q, want %q", b, want)
	}
	if ct := ContentType(b); ct != "text/plain; charset=utf-8" {
		t.Fatalf("content type %q", ct)
	}
}

// TestParseErrors: a syntax error, an unknown field, an unknown function
// and an empty template are refused at parse.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`{{.Source`, "does not parse"},
		{`{{.Nope}}`, "sample event"},
		{`{{.Reason.Len}}`, "sample event"},
		{`{{.Attempts}}`, "sample event"},
		{`{{nope .Source}}`, "does not parse"},
		{"  ", "empty"},
	} {
		_, err := Parse(c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", c.text, err, c.want)
		}
	}
}

// TestRunTimeFailure: a template that passes on the sample but fails on
// another event returns an error (the sender then sends the event JSON).
func TestRunTimeFailure(t *testing.T) {
	tp, err := Parse(`{{index .Reason 20}}`) // the sample's reason is longer than 20 bytes
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Render(Data{Reason: "short"}); err == nil {
		t.Fatal("want an error for an index out of range")
	}
	big, err := Parse(`{{range .ConsecutiveFailures}}{{printf "%1000s" "x"}}{{end}}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Render(Data{ConsecutiveFailures: 2000}); err == nil {
		t.Fatal("want an error for a body over MaxBody")
	}
}

// FuzzParse: no template text makes Parse or Render panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"text": {{json .Reason}}}`, `{{.Source}}`, `{{`, `{{range .At}}{{end}}`, `{{template "x"}}`,
		`{{define "x"}}{{template "x"}}{{end}}{{template "x"}}`, `{{json .}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := Parse(s)
		if err != nil {
			return
		}
		_, _ = tp.Render(DataOf(trickyEvent()))
	})
}
