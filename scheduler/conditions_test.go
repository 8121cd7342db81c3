package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/conditions"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
)

// TestCheckResult runs conditions and select through call, over loopback
// HTTP: a failing condition is an ordinary failure whose message masks the
// secrets it read, and a select replaces the digest and the delivered
// body.
func TestCheckResult(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Token", "s3cret-value")
		io.WriteString(w, `{"ts":"`+time.Now().String()+`","items":[{"id":1},{"id":2}]}`)
	}))
	t.Cleanup(srv.Close)
	tr := sources.NewTransports(2)
	t.Cleanup(tr.CloseIdleConnections)
	client := sources.NewClient(tr, nil)
	redact := config.NewRedactor("s3cret-value").Redact
	compile := func(conds []string, sel string) *conditions.Set {
		s, probs := conditions.NewCompiler(nil).Compile(conditions.HTTP, conds, sel)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return s
	}
	src := &config.Source{Name: "a", Type: "http", URL: srv.URL, Method: "GET", Timeout: 5 * time.Second,
		Checks: compile([]string{`status == 200`, `headers["x-token"] == "other"`}, "")}
	res, _, _ := call(t.Context(), src, sources.NewHTTP(src, client, nil), sources.Validators{}, nil, nil, time.Now, redact)
	want := `condition failed: headers["x-token"] == "other" (headers["x-token"] = "***")`
	if res.Err == nil || res.Err.Error() != want || res.Condition != `headers["x-token"] == "other"` || res.Digest != "" {
		t.Fatalf("Err %v, Condition %q, Digest %q; want %s", res.Err, res.Condition, res.Digest, want)
	}
	if strings.Contains(res.Err.Error(), "s3cret") {
		t.Fatalf("the secret is in %v", res.Err)
	}

	src = &config.Source{Name: "b", Type: "http", URL: srv.URL, Method: "GET", Timeout: 5 * time.Second,
		Checks: compile([]string{`status == 200`}, `body.json.items.map(i, i.id)`), Deliver: &config.Deliver{File: "/nonexistent/x"}}
	var delivered string
	var ctype string
	p := sources.NewHTTP(src, client, nil)
	for range 2 {
		res := p.Poll(t.Context())
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		checkResult(t.Context(), src, &res, time.Now(), time.Now, redact)
		sum := sha256.Sum256([]byte(`[1,2]`))
		if res.Err != nil || res.Digest != hex.EncodeToString(sum[:]) || res.Body == nil {
			t.Fatalf("select: Err %v, Digest %q", res.Err, res.Digest)
		}
		b, _ := io.ReadAll(res.Body.Reader())
		delivered, ctype = string(b), res.ContentType
		res.Body.Close()
	}
	if delivered != `[1,2]` || ctype != "application/json" {
		t.Fatalf("delivered %q (%s), want [1,2] as application/json", delivered, ctype)
	}
}

// TestCheckResultExecSelect: an exec source's select replaces its digest,
// although its stdout (with a changing timestamp) is not digested.
func TestCheckResultExecSelect(t *testing.T) {
	set, probs := conditions.NewCompiler(nil).Compile(conditions.Exec, []string{`exit_code == 0`}, `stdout.json.items.map(i, i.id)`)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	src := &config.Source{Name: "e", Type: "exec", Timeout: 5 * time.Second, Checks: set,
		Command: []string{"sh", "-c", `printf '{"ts":"%s","items":[{"id":1},{"id":2}]}' "$(date +%s%N)"`}}
	sum := sha256.Sum256([]byte(`[1,2]`))
	for range 2 {
		res, _, _ := call(t.Context(), src, sources.NewExec(src, nil), sources.Validators{}, nil, nil, time.Now, func(s string) string { return s })
		if res.Err != nil || res.Digest != hex.EncodeToString(sum[:]) || res.Body != nil {
			t.Fatalf("Err %v, Digest %q, Body %v: want the digest of [1,2] and no body", res.Err, res.Digest, res.Body)
		}
	}
}
