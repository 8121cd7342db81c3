package scheduler

import (
	"context"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/deliver"
	"github.com/pacer-dev/pacer/sources"
)

// resultDeliverer delivers a poll's result to its source's deliver
// targets: a *deliver.Deliverer (tests give another).
type resultDeliverer interface {
	Deliver(ctx context.Context, d *config.Deliver, r deliver.Result, redact func(string) string) error
}

var _ resultDeliverer = (*deliver.Deliverer)(nil)

// delivery is the delivery step of one poll of a source with deliver
// (contract 9.3, 9.4), run by call inside the breaker's call, under the
// poll's context (its timeout) and permits.
type delivery struct {
	d      *deps
	ctx    context.Context
	src    *config.Source
	redact *config.Redactor
	last   string    // the digest of the last delivered result
	start  time.Time // the poll's start
	failed bool      // the result was not delivered
}

// deliver delivers res, a successful result, when it is changed against
// the last delivered digest or when: always asks for every result; an
// unchanged result (a 304 included) is not delivered. It counts
// pacer_deliveries_total; its error's text starts with "deliver: ".
func (dl *delivery) deliver(res sources.Result) error {
	d := dl.src.Deliver
	if res.NotModified || (!d.Always && res.Digest == dl.last) {
		return nil
	}
	status := res.StatusCode
	if dl.src.Type == "exec" {
		status = res.ExitCode
	}
	err := dl.d.deliverer.Deliver(dl.ctx, d, deliver.Result{
		Source: dl.src.Name, Digest: res.Digest, Status: status, ContentType: res.ContentType,
		StartedAt: dl.start, Body: res.Body,
	}, dl.redact.Redact)
	dl.d.m.delivery(err == nil).Inc()
	dl.failed = err != nil
	return err
}

// spoolFailed records a result that was fetched but could not be kept for
// delivery (sources.ErrSpool): a failed delivery.
func (dl *delivery) spoolFailed() {
	dl.d.m.delivery(false).Inc()
	dl.failed = true
}
