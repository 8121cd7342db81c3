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
	req, err := http.NewRequestWithContext(ctx, w.Method, w.URL, body)
	if err != nil {
		return failure(ctx, redact, err, target, transportDetail(err))
	}
	req.ContentLength = r.Body.Size()
	ct := r.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Pacer-Source", r.Source)
	req.Header.Set("X-Pacer-Digest", r.Digest)
	for k, v := range w.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := dl.client.Do(req)
	if err != nil {
		return failure(ctx, redact, err, target, transportDetail(err))
	}
	defer resp.Body.Close()
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return failure(ctx, redact, nil, target, status(resp))
	}
	return nil
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
