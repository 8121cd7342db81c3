package sources

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// New builds the poller of src according to src.Type. clients are the
// shared HTTP clients (see NewClients) and are required for http sources.
// redact is applied to every error text a poller produces; nil means no
// redaction. src must not be written while the poller is in use.
func New(src *config.Source, clients *Clients, redact func(string) string) (Poller, error) {
	switch src.Type {
	case "http":
		if clients == nil {
			return nil, fmt.Errorf("source %q: http source needs an HTTP client", src.Name)
		}
		return newHTTP(src, clients.For(src), redact), nil
	case "exec":
		return NewExec(src, redact), nil
	default:
		return nil, fmt.Errorf("source %q: unknown type %q", src.Name, src.Type)
	}
}

// ErrLocal matches (errors.Is) the error of a poll that failed for lack of
// pacer's own resources, not because of its source: too many open files
// (EMFILE, ENFILE), no memory or buffer space (ENOMEM, ENOBUFS), a fork
// refused (EAGAIN when starting a command), no local port left
// (EADDRNOTAVAIL when dialing). Result.Local says the same.
//
// The scheduler must treat such a poll as neither a success nor a failure
// of the source: count it apart (pacer_polls_total{outcome="local_error"}),
// log it, and retry it with the backoff of consecutive local errors (rule
// 3.4's formula, not past the next schedule tick) without touching the
// source's consecutive failures, breaker or error_after count, nor its
// last error; a later local error or success resumes the source as it was.
var ErrLocal = errors.New("local resource error")

// Error is the error of a failed or throttled poll, and of a failed
// delivery (deliver.Error). Its text is already redacted; the cause is kept
// so that errors.Is(err, context.DeadlineExceeded) and errors.Is(err,
// context.Canceled) work, and errors.Is(err, ErrLocal) holds for a local
// resource error.
type Error struct {
	text  string
	cause error
	local bool
}

// NewError returns the Error of text (redacted already) and cause; local
// says that it failed for lack of pacer's own resources (ErrLocal).
func NewError(text string, cause error, local bool) *Error {
	return &Error{text: text, cause: cause, local: local}
}

func (e *Error) Error() string { return e.text }
func (e *Error) Unwrap() error { return e.cause }

// Is makes errors.Is(err, ErrLocal) hold for a local resource error.
func (e *Error) Is(target error) bool { return target == ErrLocal && e.local }

// newPollError returns an Error whose text is redact(prefix + ": " + detail).
func newPollError(redact func(string) string, cause error, prefix, detail string) error {
	return NewError(redact(prefix+": "+detail), cause, false)
}

// isLocal reports whether err, from starting a command (starting) or from
// dialing and exchanging over HTTP, is a shortage of pacer's own resources.
// EAGAIN is one only when starting a command (fork); from a socket it
// describes the peer. EADDRNOTAVAIL is one only over HTTP (no local port).
func isLocal(err error, starting bool) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.ENOBUFS:
		return true
	case syscall.EAGAIN:
		return starting
	case syscall.EADDRNOTAVAIL:
		return !starting
	}
	return false
}

// IsLocal reports whether err is a shortage of pacer's own resources (see
// ErrLocal), however it is wrapped: starting tells an error from starting a
// command (where EAGAIN is a refused fork) from one of a connection (where
// EADDRNOTAVAIL is a lack of local ports). The delivery targets classify
// their errors with it.
func IsLocal(err error, starting bool) bool { return isLocal(err, starting) }

// markLocal marks err (an *Error) as local and reports true when isLocal.
func markLocal(err, cause error, starting bool) bool {
	var pe *Error
	if cause == nil || !isLocal(cause, starting) || !errors.As(err, &pe) {
		return false
	}
	pe.local = true
	return true
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
