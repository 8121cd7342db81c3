package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var sourceKeys = []string{"name", "type", "schedule", "state", "consecutive_failures", "breaker", "next_run_at",
	"last_run_at", "last_success_at", "last_error", "error_reason", "paused_reason", "polls_total",
	"failures_total", "throttled_total", "last_changed_at", "changes_total"}

// Section 5: every endpoint, errors as JSON; section 4: the source object;
// section 6: the metrics.
func TestAdminAPI(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/h", behavior{Status: 500})
	in.writeConfig(`concurrency: 4
shutdown_timeout: 2s
defaults:
  schedule: "@every 1s"
  breaker: {failures: 0}
  error_after: 0
  backoff: {initial: 100ms, max: 1s, multiplier: 2, jitter: 0}
sources:
  - {name: h, type: http, url: "` + u.URL("/h") + `"}
  - {name: x, type: exec, command: ["sh", "-c", "echo hi"]}
  - {name: w, type: http, url: "` + u.URL("/w") + `", schedule: "0 0 1 1 *"}
`)
	d := in.start()

	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := d.do(http.MethodGet, p, "", ""); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}

	// History: two failures, then successes.
	u.waitArrivals(t, "/h", 2, 4*time.Second)
	u.Set("/h", behavior{Status: 200, Body: 7})
	u.waitArrivals(t, "/h", 4, 4*time.Second)
	eventually(t, 2*time.Second, "h ok and x polled", func() error {
		if o := d.source("h"); o.State != "ok" || o.PollsTotal < 3 {
			return errf("%s", o)
		}
		if o := d.source("x"); o.State != "ok" || o.PollsTotal < 1 {
			return errf("%s", o)
		}
		return nil
	})

	// The source object: every key, times RFC 3339 UTC or null.
	code, body := d.do(http.MethodGet, "/api/sources", "", "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/sources: %d %s", code, body)
	}
	var raw []map[string]any
	if err := json.Unmarshal(body, &raw); err != nil || len(raw) != 3 {
		t.Fatalf("GET /api/sources: want an array of 3 objects: %v %s", err, body)
	}
	for _, o := range raw {
		for _, k := range sourceKeys {
			if _, ok := o[k]; !ok {
				t.Errorf("source object %v has no %q", o["name"], k)
			}
		}
		for _, k := range []string{"next_run_at", "last_run_at", "last_success_at"} {
			switch v := o[k].(type) {
			case nil:
			case string:
				if ts, err := time.Parse(time.RFC3339Nano, v); err != nil || !strings.HasSuffix(v, "Z") || ts.Location() != time.UTC {
					t.Errorf("%v.%s = %q: want RFC 3339 in UTC", o["name"], k, v)
				}
			default:
				t.Errorf("%v.%s = %v: want a string or null", o["name"], k, v)
			}
		}
	}
	if o := d.source("w"); o.State != "pending" || o.LastRunAt != nil || o.LastSuccessAt != nil || o.NextRunAt == nil {
		t.Errorf("w (never polled): %s", o)
	}

	// History: newest first, with its fields.
	code, body = d.do(http.MethodGet, "/api/sources/h/history?n=20", "", "")
	if code != http.StatusOK {
		t.Fatalf("history: %d %s", code, body)
	}
	var rawRecs []map[string]any
	if err := json.Unmarshal(body, &rawRecs); err != nil || len(rawRecs) < 4 {
		t.Fatalf("history: %v %s", err, body)
	}
	for _, r := range rawRecs {
		for _, k := range []string{"started_at", "duration_ms", "outcome", "error", "status_code", "bytes", "changed", "digest"} {
			if _, ok := r[k]; !ok {
				t.Errorf("history record without %q: %v", k, r)
			}
		}
	}
	recs := d.history("h", 20)
	for i := 1; i < len(recs); i++ {
		if !recs[i].StartedAt.Before(recs[i-1].StartedAt) {
			t.Errorf("history not newest first: [%d] %s then [%d] %s", i-1, recs[i-1].StartedAt, i, recs[i].StartedAt)
		}
	}
	last := recs[len(recs)-1]
	if recs[0].Outcome != "success" || recs[0].Bytes != 7 || recs[0].StatusCode == nil || *recs[0].StatusCode != 200 || recs[0].Error != "" {
		t.Errorf("newest record of h: %+v", recs[0])
	}
	if last.Outcome != "failure" || last.StatusCode == nil || *last.StatusCode != 500 || !strings.Contains(last.Error, "500") {
		t.Errorf("oldest record of h: %+v", last)
	}
	// A poll may land between the two reads: the newest can only be newer.
	if got := d.history("h", 2); len(got) != 2 || got[0].StartedAt.Before(recs[0].StartedAt) || !got[1].StartedAt.Before(got[0].StartedAt) {
		t.Errorf("history?n=2: %+v", got)
	}
	xr := d.history("x", 1)
	if len(xr) != 1 || xr[0].ExitCode == nil || *xr[0].ExitCode != 0 || xr[0].Outcome != "success" {
		t.Errorf("history of exec source x: want exit_code 0, got %+v", xr)
	}
	for _, q := range []string{"n=abc", "n=0", "n=-1"} {
		if code, body := d.do(http.MethodGet, "/api/sources/h/history?"+q, "", ""); code != http.StatusBadRequest || !isJSONError(body) {
			t.Errorf("history?%s: want 400 JSON, got %d %s", q, code, body)
		}
	}

	// 404 for an unknown name, on every endpoint.
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/sources/nope"}, {"GET", "/api/sources/nope/history"},
		{"POST", "/api/sources/nope/reset"}, {"POST", "/api/sources/nope/trigger"},
		{"POST", "/api/sources/nope/pause"}, {"POST", "/api/sources/nope/resume"},
		{"GET", "/api/nothing-here"},
	} {
		if code, body := d.do(c.method, c.path, "", ""); code != http.StatusNotFound || !isJSONError(body) {
			t.Errorf("%s %s: want 404 with {\"error\": ...}, got %d %s", c.method, c.path, code, body)
		}
	}
	// 405 for a wrong method.
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/sources"}, {"POST", "/api/sources/h"}, {"DELETE", "/api/sources/h"},
		{"GET", "/api/sources/h/reset"}, {"GET", "/api/sources/h/trigger"}, {"GET", "/api/sources/h/pause"},
		{"GET", "/api/sources/h/resume"}, {"POST", "/api/sources/h/history"}, {"POST", "/healthz"},
		{"POST", "/readyz"}, {"PUT", "/metrics"},
	} {
		if code, body := d.do(c.method, c.path, "", ""); code != http.StatusMethodNotAllowed || !isJSONError(body) {
			t.Errorf("%s %s: want 405 with {\"error\": ...}, got %d %s", c.method, c.path, code, body)
		}
	}

	// pause / resume / reset / trigger.
	code, body = d.do(http.MethodPost, "/api/sources/h/pause", "", `{"reason": "api says"}`)
	var o sourceObj
	if code != http.StatusOK || json.Unmarshal(body, &o) != nil || o.State != "paused" || o.PausedReason != "api says" {
		t.Errorf("POST pause: want 200 with the paused object, got %d %s", code, body)
	}
	if code, body := d.do(http.MethodPost, "/api/sources/x/pause", "", `{"reason": `); code != http.StatusBadRequest || !isJSONError(body) {
		t.Errorf("POST pause with a malformed body: want 400 JSON, got %d %s", code, body)
	}
	if code, body := d.do(http.MethodPost, "/api/sources/x/pause", "", ""); code != http.StatusOK {
		t.Errorf("POST pause without a body: want 200, got %d %s", code, body)
	}

	// history -json prints the same records as the API (h is paused: no new polls).
	eventually(t, 3*time.Second, "pacer history -json h == GET history", func() error {
		api := d.history("h", 20)
		r := in.cli("history", "-json", "h")
		var cli []histRec
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &cli) != nil {
			return errf("%s", r)
		}
		if len(cli) != len(api) {
			return errf("%d records from the CLI, %d from the API", len(cli), len(api))
		}
		for i := range cli {
			a, c := api[i], cli[i]
			if !a.StartedAt.Equal(c.StartedAt) || a.Outcome != c.Outcome || a.Error != c.Error ||
				a.DurationMs != c.DurationMs || a.Bytes != c.Bytes || fmt.Sprint(deref(a.StatusCode)) != fmt.Sprint(deref(c.StatusCode)) {
				return errf("record %d differs: api %+v, cli %+v", i, a, c)
			}
		}
		return nil
	})

	// Metrics (section 6).
	m := d.metrics()
	for _, mt := range []struct{ name, typ string }{
		{"pacer_inflight", "gauge"}, {"pacer_concurrency_limit", "gauge"},
		{"pacer_semaphore_wait_seconds", "histogram"}, {"pacer_polls_total", "counter"},
		{"pacer_poll_duration_seconds", "histogram"}, {"pacer_schedule_lag_seconds", "histogram"},
		{"pacer_sources", "gauge"},
		{"pacer_store_errors_total", "counter"}, {"pacer_store_commit_seconds", "histogram"},
	} {
		if m.typeOf(mt.name) != mt.typ {
			t.Errorf("/metrics: no %s of type %s", mt.name, mt.typ)
		}
	}
	for _, oc := range []string{"success", "failure", "throttled", "rejected", "skipped", "interrupted", "local_error"} {
		if _, ok := m.value("pacer_polls_total", "outcome", oc); !ok {
			t.Errorf(`/metrics: no pacer_polls_total{outcome=%q}`, oc)
		}
	}
	if v, _ := m.value("pacer_polls_total", "outcome", "success"); v < 3 {
		t.Errorf(`pacer_polls_total{outcome="success"} = %v`, v)
	}
	if v, _ := m.value("pacer_polls_total", "outcome", "failure"); v < 2 {
		t.Errorf(`pacer_polls_total{outcome="failure"} = %v`, v)
	}
	if v, _, ok := m.histogram("pacer_store_commit_seconds"); !ok || v < 1 {
		t.Errorf("pacer_store_commit_seconds_count = %v after polls were committed", v)
	}
	if v, _, ok := m.histogram("pacer_poll_duration_seconds"); !ok || v < 5 {
		t.Errorf("pacer_poll_duration_seconds_count = %v", v)
	}
	for _, h := range []string{"pacer_semaphore_wait_seconds", "pacer_schedule_lag_seconds"} {
		if v, _, ok := m.histogram(h); !ok || v < 1 {
			t.Errorf("%s = %v", h, v)
		}
	}
	if sum := m.total("pacer_sources"); sum != 3 {
		t.Errorf("pacer_sources sums to %v over its states, want 3 sources", sum)
	}
	if v, ok := m.value("pacer_sources", "state", "paused"); !ok || v != 2 {
		t.Errorf(`pacer_sources{state="paused"} = %v, want 2`, v)
	}
	if v, ok := m.value("pacer_sources", "state", "pending"); !ok || v != 1 {
		t.Errorf(`pacer_sources{state="pending"} = %v, want 1 (w)`, v)
	}
	// Polls start on time here: the mean lag is small.
	lagN, lagSum, _ := m.histogram("pacer_schedule_lag_seconds")
	lagCnt := float64(lagN)
	if lagCnt < 1 || lagSum/lagCnt > 0.5 || lagSum < 0 {
		t.Errorf("pacer_schedule_lag_seconds: mean %.3fs over %v polls on an idle daemon", lagSum/lagCnt, lagCnt)
	}
	// Only sources with failures have a series (section 6): h has none.
	if v, ok := m.value("pacer_source_consecutive_failures", "source", "h"); ok {
		t.Errorf(`pacer_source_consecutive_failures{source="h"} = %v exported for a source with no failure`, v)
	}
	if v := d.metric("pacer_concurrency_limit"); v != 4 {
		t.Errorf("pacer_concurrency_limit = %v, want 4", v)
	}
	// Bounded cardinality: no per-source histograms.
	for name, f := range m {
		if typ := m.typeOf(name); !strings.HasPrefix(name, "pacer_") || (typ != "histogram" && typ != "summary") {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "source" {
					t.Errorf("/metrics has a per-source histogram: %s{source=%q}", name, l.GetValue())
				}
			}
		}
	}

	code, body = d.do(http.MethodPost, "/api/sources/h/resume", "", "")
	if code != http.StatusOK || json.Unmarshal(body, &o) != nil || o.State == "paused" || o.PausedReason != "" {
		t.Errorf("POST resume: want 200 with the resumed object, got %d %s", code, body)
	}
	code, body = d.do(http.MethodPost, "/api/sources/h/reset", "", "")
	if code != http.StatusOK || json.Unmarshal(body, &o) != nil || o.Name != "h" || o.ConsecutiveFailures != 0 {
		t.Errorf("POST reset: want 200 with the object, got %d %s", code, body)
	}
	n := u.Count("/w")
	if code, body := d.do(http.MethodPost, "/api/sources/w/trigger", "", ""); code != http.StatusAccepted {
		t.Errorf("POST trigger: want 202, got %d %s", code, body)
	}
	u.waitArrivals(t, "/w", n+1, 2500*time.Millisecond)
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// Section 5: with token_file set, every POST without the right bearer token
// gets 401 and changes nothing.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	const token = "s3cret-admin-token"
	writeFile(t, filepath.Join(in.dir, "token"), "  "+token+"\n\n")
	in.admin = "  token_file: token\n"
	in.writeConfig(`sources:
  - {name: t, type: http, url: "` + u.URL("/t") + `", schedule: "0 0 1 1 *"}
`)
	d := in.start()
	before := d.source("t")

	for _, action := range []string{"pause", "trigger", "reset", "resume"} {
		for _, tok := range []string{"", "wrong", token + "x"} {
			code, body := d.do(http.MethodPost, "/api/sources/t/"+action, tok, `{"reason": "nope"}`)
			if code != http.StatusUnauthorized || !isJSONError(body) {
				t.Errorf("POST %s with token %q: want 401 JSON, got %d %s", action, tok, code, body)
			}
		}
	}
	// Not bearer: the raw token in the header.
	req, _ := http.NewRequest(http.MethodPost, "http://"+in.addr+"/api/sources/t/pause", nil)
	req.Header.Set("Authorization", token)
	if resp, err := apiClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST pause with \"Authorization: <token>\" (no Bearer): want 401, got %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	u.noArrivals(t, "/t", d.started, 1500*time.Millisecond, "a trigger without the token must not poll")
	if after := d.source("t"); after.State != before.State || after.PausedReason != "" || after.PollsTotal != 0 {
		t.Errorf("unauthorized POSTs changed the source: before %s, after %s", before, after)
	}
	// GETs need no token.
	if code, _ := d.do(http.MethodGet, "/api/sources/t/history", "", ""); code != http.StatusOK {
		t.Errorf("GET history without a token: %d", code)
	}

	code, body := d.do(http.MethodPost, "/api/sources/t/pause", token, `{"reason": "ok"}`)
	if code != http.StatusOK || d.source("t").State != "paused" {
		t.Errorf("POST pause with the token: %d %s", code, body)
	}
	if code, body := d.do(http.MethodPost, "/api/sources/t/resume", token, ""); code != http.StatusOK {
		t.Errorf("POST resume with the token: %d %s", code, body)
	}
	if code, body := d.do(http.MethodPost, "/api/sources/t/trigger", token, ""); code != http.StatusAccepted {
		t.Errorf("POST trigger with the token: %d %s", code, body)
	}
	u.waitArrivals(t, "/t", 1, 2500*time.Millisecond)
	if code, body := d.do(http.MethodPost, "/api/sources/t/reset", token, ""); code != http.StatusOK {
		t.Errorf("POST reset with the token: %d %s", code, body)
	}
	// The CLI still steers the daemon (it does not need the token to be given).
	in.mustCLI("pause", "t")
	eventually(t, 2*time.Second, "t paused by the CLI", func() error {
		if o := d.source("t"); o.State != "paused" {
			return errf("%s", o)
		}
		return nil
	})
}
