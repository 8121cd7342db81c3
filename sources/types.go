// Package sources implements the pollers: HTTP requests and child processes.
//
// A Poller is built once per source from its effective configuration and
// called by the scheduler only after the poll holds its permits, so it opens
// sockets, files and processes only inside Poll.
package sources

import (
	"context"
	"net/http"
)

// Result is what one poll observed. Classification into success, failure and
// throttling is done here; timing policy (backoff, Retry-After) is not.
type Result struct {
	// Err is nil on success. For a throttled poll it describes the
	// throttling ("429 Too Many Requests"). Its text never contains a secret.
	Err error
	// Throttled is true for a 429, or a 503 with a Retry-After header.
	Throttled bool
	// RetryAfter is the raw Retry-After header of a throttled answer, or "".
	RetryAfter string
	// StatusCode is the HTTP status, or 0 (exec, or no response).
	StatusCode int
	// ExitCode is the exit status of an exec poll, or -1 (http, or killed).
	ExitCode int
	// Bytes is the number of response body (http) or stdout (exec) bytes read.
	Bytes int64
	// Local is true when the poll failed for lack of pacer's own resources
	// (errors.Is(Err, ErrLocal)): the scheduler counts it apart and never
	// against the source (see ErrLocal).
	Local bool

	// The result (contract 9.1, 9.2). Digest is the SHA-256 (hex) of the
	// body of a successful http poll or the stdout of a successful exec
	// poll, computed while reading it; "" otherwise and for a 304.
	Digest string
	// NotModified is true for a 304 answer to a conditional GET: a
	// successful poll whose result is unchanged (Digest "").
	NotModified bool
	// ETag and LastModified are the validators of a successful 200 answer
	// ("" when it had none), to send with the next GET once the result is
	// delivered (see Validators).
	ETag, LastModified string
	// Body is the result of a successful poll of a source with deliver
	// (its body or stdout), nil otherwise and for a 304. The caller owns it
	// and must Close it.
	Body *Capture
	// ContentType is the Content-Type of an http answer kept in Body, or "".
	ContentType string

	// Answer is the http answer (its body read; nil for exec and when
	// there was none): what the conditions read of its headers and
	// certificate (contract section 14), and the scheduler of its headers
	// (a spent quota, the cache lifetime: 13.2, 13.6). Read only.
	// Condition is the expression of the condition that failed the poll,
	// or "".
	Answer    *http.Response
	Condition string
}

// Validators are the ETag and Last-Modified of the last delivered 200
// answer of an http source, sent as If-None-Match and If-Modified-Since
// (contract 9.1). The zero value sends neither.
type Validators struct {
	ETag, LastModified string
}

// ConditionalPoller is a Poller that can send a conditional request: the
// http poller. PollSince is Poll with the validators of the last delivered
// result; a source with conditional: false, or whose method is not GET,
// ignores them.
type ConditionalPoller interface {
	Poller
	PollSince(ctx context.Context, v Validators) Result
}

// Poller performs one poll. Poll must return promptly once ctx is done
// (deadline or cancellation); the caller classifies ctx.Err() itself.
type Poller interface {
	Poll(ctx context.Context) Result
}
