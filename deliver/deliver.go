// Package deliver hands a poll's changed result to the targets of its
// source's deliver block (contract 9.3, 9.4): a file written atomically, a
// command that reads it on stdin, a webhook that receives it as its body.
// A delivery runs inside the poll (its context is the poll's, with its
// timeout); the scheduler counts its failure as the poll's.
package deliver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
)

// Body is a result that can be read whole, from its start, once per
// target.
type Body interface {
	Reader() *io.SectionReader
	Size() int64
}

var _ Body = (*sources.Capture)(nil)

// Result is one result to deliver and what its targets are told of it.
type Result struct {
	Source      string    // the source's name
	Digest      string    // SHA-256 of Body, hex
	Status      int       // the http status, or the exit code of an exec poll
	ContentType string    // of an http answer, or ""
	StartedAt   time.Time // the poll's start
	Body        Body
}

// Deliverer delivers results. One is shared by every source of a daemon;
// it is safe for concurrent use.
type Deliverer struct {
	client *http.Client
	env    []string // the daemon's environment, for commands
}

// New returns a Deliverer whose webhooks are sent over rt (the daemon's
// shared transport; nil for http.DefaultTransport). Redirects are never
// followed: a 3xx answer is a failure.
func New(rt http.RoundTripper) *Deliverer {
	return &Deliverer{client: NewClient(rt), env: os.Environ()}
}

// Error is a failed delivery. Its text starts with "deliver: " and is
// redacted; Unwrap gives the cause (context.DeadlineExceeded at the
// poll's timeout). errors.Is(err, sources.ErrLocal) holds when it failed
// for lack of pacer's own resources (descriptors, memory, a refused fork):
// rule 3.14, the scheduler then never counts it against the source. It is
// a poll's error type (sources.Error): a delivery is the end of a poll.
type Error = sources.Error

// failure returns the *Error "deliver: TARGET: DETAIL", redacted, or the
// timeout or cancellation when ctx is done.
func failure(ctx context.Context, redact func(string) string, cause error, target, detail string) error {
	return failureOf(ctx, redact, cause, false, target, detail)
}

// failureOf is failure; starting tells that cause comes from starting a
// command (a refused fork, EAGAIN, is then local too).
func failureOf(ctx context.Context, redact func(string) string, cause error, starting bool, target, detail string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		cause, detail = ctxErr, "canceled"
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			detail = "timeout"
		}
	}
	local := cause != nil && ctx.Err() == nil && sources.IsLocal(cause, starting)
	return sources.NewError(redact("deliver: "+target+": "+detail), cause, local)
}

// Deliver hands r to every target of d, in the order file, command,
// webhook, and stops at the first that fails: every target must succeed
// for the result to be delivered (the next poll delivers it to all
// again). redact is applied to every error text (nil: none).
func (dl *Deliverer) Deliver(ctx context.Context, d *config.Deliver, r Result, redact func(string) string) error {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	if d.File != "" {
		if err := writeFile(ctx, d.File, r.Body.Reader()); err != nil {
			return failure(ctx, redact, err, "file "+d.File, err.Error())
		}
	}
	if len(d.Command) > 0 {
		if err := dl.command(ctx, d.Command, r, redact); err != nil {
			return err
		}
	}
	if d.Webhook != nil {
		if err := dl.webhook(ctx, d.Webhook, r, redact); err != nil {
			return err
		}
	}
	return nil
}

// ctxReader reads r until ctx is done: a delivery stops at the poll's
// timeout even while it copies.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// commandFDs is the descriptors a delivery command holds while it starts:
// both ends of its stdin and stderr pipes, /dev/null for its stdout, and
// its pidfd (the pipe that reports a failed exec is taken by one start at
// a time, under the fork lock: the daemon's headroom covers it).
const commandFDs = 6

// Descriptors returns how many descriptors a delivery to d may hold at
// once on top of its poll's own (contract section 7: they count in the
// per-poll budget that clamps the concurrency): its result's spool file,
// and the costliest of its targets, which run one after the other: a
// command while it starts (commandFDs), the file's temporary file, the
// webhook's connection. 0 for no delivery.
func Descriptors(d *config.Deliver) int {
	if d == nil {
		return 0
	}
	target := 0
	if d.File != "" || d.Webhook != nil {
		target = 1
	}
	if len(d.Command) > 0 {
		target = commandFDs
	}
	return 1 + target
}
