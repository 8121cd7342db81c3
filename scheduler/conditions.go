package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/pacer-dev/pacer/conditions"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
)

// checkResult runs the conditions and select of src (contract section 14)
// on res, a poll that rule 3.4 counts as a success other than a 304: a
// condition that is false or fails, or a select that fails, makes it an
// ordinary failure (res.Err, its text redacted; res.Condition names the
// condition), which backoff, the breaker and error_after then treat as
// any other; a select replaces the result, for change detection (the
// digest of its canonical JSON) and delivery (that JSON). start is when
// the poll started, now the clock.
func checkResult(ctx context.Context, src *config.Source, res *sources.Result, start time.Time, now func() time.Time, redact func(string) string) {
	t := now()
	in := conditions.Input{Status: res.StatusCode, ExitCode: res.ExitCode, Duration: t.Sub(start), Now: t}
	if a := res.Answer; a != nil {
		in.Header = a.Header
		if a.TLS != nil && len(a.TLS.PeerCertificates) > 0 {
			in.Cert = a.TLS.PeerCertificates[0]
		}
	}
	if res.Body != nil {
		in.Body = res.Body
	}
	out := src.Checks.Evaluate(ctx, &in)
	switch {
	case out.Err != nil:
		res.Err = sources.NewError(redact(out.Err.Error()), nil, false)
		res.Condition, res.Digest, res.ETag, res.LastModified = redact(out.Condition), "", "", ""
		dropBody(res)
	case out.Selected != nil:
		sum := sha256.Sum256(out.Selected)
		res.Digest = hex.EncodeToString(sum[:])
		dropBody(res)
		if src.Deliver != nil {
			c := sources.NewCapture("")
			if _, err := c.Write(out.Selected); err != nil {
				c.Close()
				res.Err = sources.NewError(redact("deliver: "+err.Error()), err, false)
				return
			}
			res.Body, res.ContentType = c, "application/json"
		}
	case src.Deliver == nil:
		dropBody(res) // kept for the conditions only
	}
}

// dropBody closes and forgets res.Body.
func dropBody(res *sources.Result) {
	if res.Body != nil {
		res.Body.Close()
		res.Body = nil
	}
}
