package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/deliver"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/sources"
)

// maxAnswer bounds what is kept of a command's
// output: only its status matters.
const maxAnswer = 64 << 10

// payload is the JSON of an event (contract 10.1).
type payload struct {
	ID                  string    `json:"id"`
	Event               string    `json:"event"`
	Source              string    `json:"source"`
	State               string    `json:"state"`
	PreviousState       string    `json:"previous_state"`
	Reason              string    `json:"reason"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	At                  time.Time `json:"at"`
	// Reminder is true in a reminder (notify.remind_every), absent
	// otherwise.
	Reminder bool `json:"reminder,omitempty"`
}

// hostPayload is the JSON of a host event (contract 13.7): its host and
// number of sources, and a null source.
type hostPayload struct {
	ID            string    `json:"id"`
	Event         string    `json:"event"`
	Source        *string   `json:"source"`
	Host          string    `json:"host"`
	Sources       int       `json:"sources"`
	State         string    `json:"state"`
	PreviousState string    `json:"previous_state"`
	Reason        string    `json:"reason"`
	At            time.Time `json:"at"`
}

// Marshal is the JSON body of ev that every target gets.
func Marshal(ev domain.Event) ([]byte, error) {
	var v any = payload{
		ID: ev.ID, Event: ev.Event, Source: ev.Source, State: ev.State, PreviousState: ev.PreviousState,
		Reason: ev.Reason, ConsecutiveFailures: ev.ConsecutiveFailures, At: ev.At.UTC(), Reminder: ev.Reminder,
	}
	if ev.Host != "" {
		v = hostPayload{ID: ev.ID, Event: ev.Event, Host: ev.Host, Sources: ev.Sources, State: ev.State,
			PreviousState: ev.PreviousState, Reason: ev.Reason, At: ev.At.UTC()}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("notify: encode event %s: %w", ev.ID, err)
	}
	return b, nil
}

// newClient is the webhooks' HTTP client: deliver's (no redirect
// followed), over a transport of its own sized to the deliveries in flight.
func newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxInFlight
	return deliver.NewClient(tr)
}

// postWebhook sends body to w as ctype with the event's id; only a 2xx
// answer is a success (deliver.Post, as result webhooks are sent).
func postWebhook(ctx context.Context, c *http.Client, w *config.Webhook, id string, body []byte, ctype string) error {
	hdr := http.Header{"Content-Type": {ctype}, "X-Pacer-Event-Id": {id}}
	answer, err := deliver.Post(ctx, c, w, bytes.NewReader(body), int64(len(body)), hdr)
	switch {
	case err != nil:
		return fmt.Errorf("webhook: %w", err)
	case answer != "":
		return fmt.Errorf("webhook: answered %s", answer)
	}
	return nil
}

// runCommand runs argv with body on stdin as an exec poll runs its command
// (sources.GroupCmd): in its own process group, killed at ctx's end and,
// whatever the outcome, once the command has exited (what it left behind
// goes with it). It gets the daemon's environment.
func runCommand(ctx context.Context, argv []string, body []byte) error {
	cmd, err := sources.NewGroupCmd(ctx, argv, os.Environ())
	if err != nil {
		return fmt.Errorf("command: %w", err)
	}
	var out tail
	cmd.Stdin = bytes.NewReader(body)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("command: %w (its process group was killed)", ctx.Err())
	}
	if line := out.lastLine(); line != "" {
		return fmt.Errorf("command: %w: %s", err, line)
	}
	return fmt.Errorf("command: %w", err)
}

// tail keeps the last maxAnswer bytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > maxAnswer {
		t.b = append(t.b[:0], t.b[len(t.b)-maxAnswer:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty line written, at most 200 bytes.
func (t *tail) lastLine() string {
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = l[:200]
	}
	return l
}
