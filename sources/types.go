// Package sources implements the pollers: HTTP requests and child processes.
//
// A Poller is built once per source from its effective configuration and
// called by the scheduler only after the poll holds its permits, so it opens
// sockets, files and processes only inside Poll.
package sources

import "context"

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
}

// Poller performs one poll. Poll must return promptly once ctx is done
// (deadline or cancellation); the caller classifies ctx.Err() itself.
type Poller interface {
	Poll(ctx context.Context) Result
}
