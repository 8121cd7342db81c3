package sources

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// New builds the poller of src according to src.Type. client is the shared
// HTTP client (see NewClient) and is required for http sources. redact is
// applied to every error text a poller produces; nil means no redaction.
func New(src *config.Source, client *http.Client, redact func(string) string) (Poller, error) {
	switch src.Type {
	case "http":
		if client == nil {
			return nil, fmt.Errorf("source %q: http source needs an HTTP client", src.Name)
		}
		return NewHTTP(src, client, redact), nil
	case "exec":
		return NewExec(src, redact), nil
	default:
		return nil, fmt.Errorf("source %q: unknown type %q", src.Name, src.Type)
	}
}

// pollError is the error of a failed or throttled poll. Its text is already
// redacted; the cause is kept so that errors.Is(err, context.DeadlineExceeded)
// and errors.Is(err, context.Canceled) work.
type pollError struct {
	text  string
	cause error
}

func (e *pollError) Error() string { return e.text }
func (e *pollError) Unwrap() error { return e.cause }

// newPollError returns a pollError whose text is redact(prefix + ": " + detail).
func newPollError(redact func(string) string, cause error, prefix, detail string) error {
	return &pollError{text: redact(prefix + ": " + detail), cause: cause}
}

// ctxDetail describes a poll cut off by its context: a timeout (deadline) or
// a cancellation (shutdown).
func ctxDetail(ctxErr error, timeout time.Duration) string {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		if timeout <= 0 {
			return "timeout"
		}
		return "timeout after " + timeout.String()
	}
	return "canceled"
}

func identity(s string) string { return s }

func orIdentity(redact func(string) string) func(string) string {
	if redact == nil {
		return identity
	}
	return redact
}
