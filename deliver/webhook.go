package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/pacer-dev/pacer/config"
)

// maxDrain bounds how much of a webhook's answer is read so that its
// connection can be reused.
const maxDrain = 64 << 10

// webhook sends r as the body of one request to w: Content-Length and
// Content-Type (application/octet-stream when the result has none),
// X-Pacer-Source and X-Pacer-Digest, then w's own headers. An answer
// outside 2xx (a redirect included: none is followed) or a transport error
// fails.
func (dl *Deliverer) webhook(ctx context.Context, w *config.Webhook, r Result, redact func(string) string) error {
	target := "webhook " + w.Method + " " + redactedURL(w.URL)
	var body io.Reader = http.NoBody
	if r.Body.Size() > 0 {
		body = r.Body.Reader()
	}
	ct := r.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	hdr := http.Header{"Content-Type": {ct}, "X-Pacer-Source": {r.Source}, "X-Pacer-Digest": {r.Digest}}
	answer, err := Post(ctx, dl.client, w, body, r.Body.Size(), hdr)
	switch {
	case err != nil:
		return failure(ctx, redact, err, target, err.Error())
	case answer != "":
		return failure(ctx, redact, nil, target, answer)
	}
	return nil
}

// Post sends body (size bytes) to the webhook w over c (a client from
// NewClient) with the headers hdr, then w's own (a Host header sets the
// request's host), and reads at most 64 KiB of the answer so that the
// connection can be reused. It returns the answer's status line when it
// is outside 2xx, or a transport error without net/http's "Post "url":"
// prefix (its text never quotes the URL, which may hold a password). The
// delivery targets and the notification webhooks both send through it.
func Post(ctx context.Context, c *http.Client, w *config.Webhook, body io.Reader, size int64, hdr http.Header) (answer string, err error) {
	req, err := http.NewRequestWithContext(ctx, w.Method, w.URL, body)
	if err != nil {
		return "", errors.New(transportDetail(err))
	}
	req.ContentLength = size
	req.Header = hdr
	for k, v := range w.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return "", uerr.Err
		}
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return status(resp), nil
	}
	return "", nil
}

// NewClient is a webhook client over rt (nil: http.DefaultTransport) that
// follows no redirect: a 3xx is the answer, outside 2xx, so a failure.
func NewClient(rt http.RoundTripper) *http.Client {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// redactedURL is raw with the password of its user info, if any, shown
// as "xxxxx" (the Redactor masks it too; this holds without one).
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if _, has := u.User.Password(); !has {
		return raw
	}
	return u.Redacted()
}

// transportDetail is err without net/http's "Post "url":" prefix (the
// target names the URL, redacted).
func transportDetail(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error()
	}
	return err.Error()
}

// status returns the status line of resp, such as "500 Internal Server Error".
func status(resp *http.Response) string {
	if resp.Status != "" {
		return resp.Status
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
}
