package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/pacer-dev/pacer/config"
)

const (
	// maxRedirects is how many redirects a poll follows before it fails.
	maxRedirects = 10
	// maxDrain bounds how much of an unwanted (failed or throttled) response
	// body is read so that its connection can be reused.
	maxDrain = 64 << 10
	// defaultMaxBody applies when a source has no positive max_body.
	defaultMaxBody = 10 << 20
	// MaxHeaderBytes caps the response headers of one answer (status line
	// included), whatever max_body says: a larger header fails the poll.
	MaxHeaderBytes = 1 << 20
)

// NewTransport returns the *http.Transport of the built-in client settings
// (see Transports for the others), sized to the global concurrency cap maxConns: at most maxConns connections
// per host, and as many kept idle, so that polls at full concurrency reuse
// their connections instead of dialing again. It has dial, TLS handshake and
// idle timeouts, takes its proxy from the environment and attempts HTTP/2.
// Response headers are capped at MaxHeaderBytes (1 MiB) so that one answer
// cannot make pacer buffer up to max_body of headers. There is no response
// timeout: every poll's context carries its timeout.
func NewTransport(maxConns int) *http.Transport {
	t, _ := NewClientTransport(maxConns, nil) // never fails without settings
	return t
}

// NewClient returns the HTTP client of all http sources over t. It follows
// at most 10 redirects (an 11th fails the poll) and never one to the admin
// listener: admin lists the admin API's listen addresses (host:port, as
// configured or as bound); a redirect to one of their ports on the admin
// host or on any address of this machine fails the poll, judged from the
// URL and again from the address each redirect hop's connection is made
// to (see egress.go: a name resolving elsewhere when dialled, DNS
// rebinding, is caught there). A source's own URL may be the admin
// listener. Each poller adds
// its source's rule (GET and HEAD only, follow_redirects, headers dropped
// when leaving the origin; see NewHTTP). The client has no Timeout of its
// own: each poll's context bounds it.
func NewClient(t http.RoundTripper, admin []string) *http.Client {
	return &http.Client{
		Transport:     t,
		CheckRedirect: checkRedirect(parseAdmin(admin), net.DefaultResolver),
	}
}

// httpPoller polls an http source.
//
// It holds its source (never written once loaded, see config.Config.Sources)
// rather than copies of its fields, and a client shared with every source of
// the same redirect rule and client settings (Clients): 48 bytes a source
// instead of ~330 at 100,000 sources.
type httpPoller struct {
	src    *config.Source
	auth   string // Authorization from basic_auth or bearer_token_file, or ""
	client *http.Client
	redact func(string) string
	// conditional: a GET whose source has conditional on (the default)
	// sends the validators it is given (PollSince).
	conditional bool
	// capture: the source has deliver, so a successful answer's body is
	// kept (Result.Body) while it is digested.
	capture bool
}

var _ ConditionalPoller = (*httpPoller)(nil)

// NewHTTP returns the poller of the http source src, sending its requests
// through client (which must not be nil). redact is applied to every error
// text; nil means no redaction. A non-positive src.MaxBody means 10 MiB.
//
// A poll succeeds when the status is in src.ExpectStatus (any 2xx when it is
// empty) and the body is at most src.MaxBody bytes. A status listed in
// ExpectStatus is a success even if it is 429 or 503. Otherwise a 429, or a
// 503 with a Retry-After header, is throttled (Result.Throttled and
// RetryAfter set, Err describes it); any other status, a transport error, a
// timeout or a body over the limit is a failure.
//
// Redirects: a GET or HEAD follows them when src.FollowRedirects is nil or
// true, under the client's own rule (see NewClient); every configured header
// is dropped once a redirect changes the scheme, host or port. Any other
// method, or follow_redirects false, takes the 3xx as the answer (a failure
// unless it is in ExpectStatus).
//
// A source with deliver keeps the body of a successful answer as it is
// digested (Result.Body, a Capture: memory up to 1 MiB, a spool file
// beyond); with when: always its GETs send no validator (a 304 has no
// result to deliver).
//
// Client settings: when client's transport is a *Transports (as the
// scheduler's is), the poller sends through the transport of
// src.Client's settings, shared with the sources whose settings are equal.
// Over any other transport a source with client settings fails every poll
// (they would be ignored otherwise). src.Auth's Authorization is sent with
// every request, and dropped with the other headers on leaving the origin.
//
// src must not be written while the poller is in use.
func NewHTTP(src *config.Source, client *http.Client, redact func(string) string) Poller {
	return newHTTP(src, deriveClient(client, src), redact)
}

// newHTTP returns the poller of src sending through client, src's own (see
// deriveClient).
func newHTTP(src *config.Source, client *http.Client, redact func(string) string) *httpPoller {
	p := &httpPoller{src: src, auth: src.Auth.Header(), client: client, redact: orIdentity(redact),
		capture: src.Deliver != nil || src.Checks.NeedsBody()}
	p.conditional = p.method() == http.MethodGet && (src.Conditional == nil || *src.Conditional) &&
		(src.Deliver == nil || !src.Deliver.Always)
	return p
}

// method is the source's method, GET when unset.
func (p *httpPoller) method() string {
	if p.src.Method == "" {
		return http.MethodGet
	}
	return p.src.Method
}

// maxBody is the source's max_body, 10 MiB when unset.
func (p *httpPoller) maxBody() int64 {
	if p.src.MaxBody <= 0 {
		return defaultMaxBody
	}
	return p.src.MaxBody
}

// errorPfx starts the text of the poll's errors: "GET <redacted url>".
func (p *httpPoller) errorPfx() string { return p.method() + " " + p.redact(p.src.URL) }

// Poll sends one unconditional request and classifies its answer.
func (p *httpPoller) Poll(ctx context.Context) Result {
	return p.PollSince(ctx, Validators{})
}

// PollSince sends one request, conditional on v when the source allows it
// (a GET with conditional on, and neither header set by the source's own
// headers), and classifies its answer. A 304 to a conditional request is a
// success, NotModified; the body of any other success is digested as it
// is read (Result.Digest), and a 200's validators are returned.
func (p *httpPoller) PollSince(ctx context.Context, v Validators) Result {
	res := Result{ExitCode: -1}
	req, err := p.newRequest(ctx)
	sent := false // the request is conditional
	if err == nil && p.conditional {
		sent = conditional(req, v)
	}
	if err != nil {
		res.Err = p.transportError(ctx, err)
		return res
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// On a CheckRedirect error resp is the last response, body closed.
		if resp != nil {
			res.StatusCode = resp.StatusCode
		}
		res.Err = p.transportError(ctx, err)
		res.Local = ctx.Err() == nil && markLocal(res.Err, err, false)
		return res
	}
	defer resp.Body.Close()
	res.StatusCode, res.Answer = resp.StatusCode, resp

	switch {
	case resp.StatusCode == http.StatusNotModified && sent:
		res.Bytes, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
		res.NotModified = true
	case p.expected(resp.StatusCode):
		p.readBody(ctx, resp, &res)
	case resp.StatusCode == http.StatusTooManyRequests ||
		resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		res.Bytes, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
		res.Throttled = true
		res.RetryAfter = resp.Header.Get("Retry-After")
		res.Err = p.errorf(nil, "%s", status(resp))
	default:
		res.Bytes, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
		res.Err = p.errorf(nil, "%s", status(resp))
	}
	return res
}

// readBody reads and digests the body of a successful answer into res: to
// EOF (so the connection is reused) but never past max_body, a longer body
// being closed unread (which drops its connection) and a failure. Only a
// body read whole has a digest; a 200's validators come with it.
func (p *httpPoller) readBody(ctx context.Context, resp *http.Response, res *Result) {
	var lent *[digestBuf]byte
	bufs := buffersOf(p.client.Transport)
	if bufs != nil {
		lent = bufs.get()
		defer bufs.put(lent) // d is done with it when readBody returns
	}
	d := &digester{off: p.src.Checks.Selects()} // the select's digest is the result's (checkResult)
	maxBody := p.maxBody()
	d.size(resp.ContentLength, maxBody+1, lent)
	var c *Capture
	switch {
	case p.capture && p.src.Deliver == nil && bufs != nil: // for the conditions only
		c = lentCapture(bufs)
		d.sink = c
	case p.capture:
		c = NewCapture("")
		d.sink = c
	}
	n, err := d.readAtMost(resp.Body, maxBody+1)
	res.Bytes = n
	switch {
	case err != nil:
		res.Err = p.readError(ctx, err)
		var se *sinkError // no descriptor for the spool file: local
		res.Local = errors.As(err, &se) && ctx.Err() == nil && markLocal(res.Err, err, false)
	case n > maxBody:
		res.Err = p.errorf(nil, "response body exceeds max_body (%d bytes)", maxBody)
	default:
		res.Digest = d.hex()
		if c != nil {
			res.Body, c = c, nil
			res.ContentType = resp.Header.Get("Content-Type")
		}
		if resp.StatusCode == http.StatusOK {
			res.ETag, res.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
		}
		if p.src.Checks != nil {
			forConditions(p.src.Checks, resp, res)
		}
	}
	c.Close() // a failed poll's capture (nil otherwise)
}

// readError is the error of a body that could not be read whole: a
// failure to keep it for delivery ("deliver: spool: ...") or to read it.
func (p *httpPoller) readError(ctx context.Context, err error) error {
	var se *sinkError
	if errors.As(err, &se) {
		return newPollError(p.redact, err, "deliver", se.Error())
	}
	return p.transportError(ctx, fmt.Errorf("reading body: %w", err))
}

// conditional adds v to req as If-None-Match and If-Modified-Since, each
// unless v lacks it or the source's headers set it already, and reports
// whether it added one: a 304 is an unchanged result only then (otherwise
// it is judged by expect_status like any status).
func conditional(req *http.Request, v Validators) bool {
	sent := false
	if v.ETag != "" && req.Header.Get("If-None-Match") == "" {
		req.Header.Set("If-None-Match", v.ETag)
		sent = true
	}
	if v.LastModified != "" && req.Header.Get("If-Modified-Since") == "" {
		req.Header.Set("If-Modified-Since", v.LastModified)
		sent = true
	}
	return sent
}

// newRequest builds the request of one poll.
func (p *httpPoller) newRequest(ctx context.Context) (*http.Request, error) {
	var body io.Reader
	if p.src.Body != "" {
		body = strings.NewReader(p.src.Body)
	}
	req, err := http.NewRequestWithContext(ctx, p.method(), p.src.URL, body)
	if err != nil {
		return nil, err
	}
	for k, v := range p.src.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	return req, nil
}

// clientTransports yields the RoundTripper of a source's client settings
// (implemented by *Transports).
type clientTransports interface {
	For(c *config.Client) http.RoundTripper
}

// errNoTransports fails the polls of a source with client settings sent
// over a transport that cannot honour them.
var errNoTransports = errors.New("source has client settings (tls, proxy_url, http2) but its client's transport is not a sources.Transports")

// transportFor returns the RoundTripper for client settings c over rt.
func transportFor(rt http.RoundTripper, c *config.Client) http.RoundTripper {
	if ts, ok := rt.(clientTransports); ok {
		return ts.For(c)
	}
	if c.Key() == "" {
		return rt
	}
	return failingTransport{err: errNoTransports}
}

func (p *httpPoller) expected(code int) bool {
	if len(p.src.ExpectStatus) == 0 {
		return code >= 200 && code <= 299
	}
	for _, c := range p.src.ExpectStatus {
		if c == code {
			return true
		}
	}
	return false
}

// transportError turns err (from building, sending or reading) into the
// poll's error: a timeout or cancellation when ctx is done, otherwise
// "METHOD URL: cause" with net/http's own "Get "url":" prefix removed.
func (p *httpPoller) transportError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return newPollError(p.redact, ctxErr, p.errorPfx(), ctxDetail(ctxErr, p.src.Timeout))
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	detail := err.Error()
	if strings.Contains(detail, "server response headers exceeded") {
		detail = fmt.Sprintf("response headers exceed %d bytes (1 MiB)", MaxHeaderBytes)
	}
	return newPollError(p.redact, err, p.errorPfx(), detail)
}

func (p *httpPoller) errorf(cause error, format string, args ...any) error {
	return newPollError(p.redact, cause, p.errorPfx(), fmt.Sprintf(format, args...))
}

// status returns the status line of resp, such as "502 Bad Gateway".
func status(resp *http.Response) string {
	if resp.Status != "" {
		return resp.Status
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
}
