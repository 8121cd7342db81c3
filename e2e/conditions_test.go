package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// bodyServer answers every GET with the body its function returns.
func bodyServer(t *testing.T, body func() string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// condRec is a history record with its condition (contract 14.5).
type condRec struct {
	Outcome   string `json:"outcome"`
	Error     string `json:"error"`
	Condition string `json:"condition"`
}

// TestConditionDegraded (contract 14.2): a 200 whose body turns from
// {"status":"ok"} to {"status":"degraded"} fails its condition: the source
// goes to backoff, then error with the condition as its reason (the error
// event carries it), and recovers once the body turns back.
func TestConditionDegraded(t *testing.T) {
	t.Parallel()
	var status atomic.Value
	status.Store("ok")
	up := bodyServer(t, func() string { return `{"status":"` + status.Load().(string) + `"}` })
	r := newHookReceiver(t, recvOK)
	in := newInst(t)
	in.writeConfig(notifyYAML(r, "") + `defaults:
  schedule: "@every 300ms"
  backoff: {initial: 300ms, max: 1s}
  breaker: {failures: 0}
  error_after: 3
sources:
  - name: api
    type: http
    url: "` + up.URL + `/health"
    error_reprobe: 1s
    conditions: [status == 200, 'body.json.status == "ok"']
`)
	d := in.start()
	eventually(t, 10*time.Second, "a successful poll", func() error {
		if o := d.source("api"); o.State != "ok" || o.LastSuccessAt == nil {
			return errf("%v", o)
		}
		return nil
	})
	status.Store("degraded")
	const reason = `condition failed: body.json.status == "ok" (body.json.status = "degraded")`
	eventually(t, 10*time.Second, "backoff", func() error {
		if o := d.source("api"); o.State != "backoff" || o.LastError != reason {
			return errf("%v", o)
		}
		return nil
	})
	eventually(t, 15*time.Second, "error", func() error {
		if o := d.source("api"); o.State != "error" || !strings.Contains(o.ErrorReason, reason) {
			return errf("%v", o)
		}
		return nil
	})
	var recs []condRec
	d.getJSON("/api/sources/api/history?n=1", &recs)
	if len(recs) != 1 || recs[0].Outcome != "failure" || recs[0].Condition != `body.json.status == "ok"` || recs[0].Error != reason {
		t.Fatalf("history %+v", recs)
	}
	if out := in.mustCLI("history", "api", "-n", "1").stdout; !strings.Contains(out, "CONDITION") || !strings.Contains(out, `body.json.status == "ok"`) {
		t.Fatalf("pacer history:\n%s", out)
	}
	status.Store("ok")
	eventually(t, 15*time.Second, "recovered", func() error {
		if o := d.source("api"); o.State != "ok" {
			return errf("%v", o)
		}
		return nil
	})
	eventually(t, 10*time.Second, "the error and recovered events", func() error {
		acc, _ := r.got()
		if len(acc) != 2 || acc[0].Event != "error" || !strings.Contains(acc[0].Reason, reason) || acc[1].Event != "recovered" {
			return errf("%+v", acc)
		}
		return nil
	})
}

// deliveryCounter is a loopback webhook receiver of deliveries.
type deliveryCounter struct {
	mu     sync.Mutex
	bodies []string
	types  []string
	srv    *httptest.Server
}

func newDeliveryCounter(t *testing.T) *deliveryCounter {
	c := &deliveryCounter{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, string(b))
		c.types = append(c.types, r.Header.Get("Content-Type"))
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *deliveryCounter) got() ([]string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bodies...), append([]string(nil), c.types...)
}

// TestSelectDeliversOnlyChanges (contract 14.3): a feed whose body
// carries a timestamp that changes on every poll, with a select on its
// items, is delivered only when the items change, as their JSON.
func TestSelectDeliversOnlyChanges(t *testing.T) {
	t.Parallel()
	var items atomic.Value
	items.Store(`[{"id":1,"t":"a"},{"id":2,"t":"b"}]`)
	var polls atomic.Int64
	up := bodyServer(t, func() string {
		n := polls.Add(1)
		return fmt.Sprintf(`{"generated_at":"2026-12-07T12:00:%02dZ","n":%d,"items":%s}`, n%60, n, items.Load())
	})
	recv := newDeliveryCounter(t)
	in := newInst(t)
	in.writeConfig(`sources:
  - name: feed
    type: http
    schedule: "@every 200ms"
    url: "` + up.URL + `/feed"
    select: body.json.items.map(i, i.id)
    deliver: {webhook: {url: "` + recv.srv.URL + `/in"}}
`)
	d := in.start()
	eventually(t, 10*time.Second, "the first delivery", func() error {
		if b, _ := recv.got(); len(b) != 1 {
			return errf("%d deliveries", len(b))
		}
		return nil
	})
	start := polls.Load()
	eventually(t, 15*time.Second, "six more polls", func() error {
		if n := polls.Load(); n < start+6 {
			return errf("%d polls", n-start)
		}
		return nil
	})
	items.Store(`[{"id":1,"t":"a"},{"id":2,"t":"b"},{"id":3,"t":"c"}]`)
	eventually(t, 10*time.Second, "the second delivery", func() error {
		if b, _ := recv.got(); len(b) != 2 {
			return errf("%d deliveries", len(b))
		}
		return nil
	})
	start = polls.Load()
	eventually(t, 15*time.Second, "six more polls", func() error {
		if n := polls.Load(); n < start+6 {
			return errf("%d polls", n-start)
		}
		return nil
	})
	bodies, types := recv.got()
	if len(bodies) != 2 || bodies[0] != `[1,2]` || bodies[1] != `[1,2,3]` || types[0] != "application/json" {
		t.Fatalf("deliveries %q (%q) after %d polls", bodies, types, polls.Load())
	}
	d.stop(10 * time.Second)
}

// TestConditionCertExpiry (contract 14.1, 14.4): an https server whose
// certificate expires in 10 days, trusted through the source's tls
// ca_file, fails the 14-day condition; the source enters error with it.
func TestConditionCertExpiry(t *testing.T) {
	t.Parallel()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cond ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	in := newInst(t)
	writeFile(t, filepath.Join(in.dir, "ca.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	in.writeConfig(`sources:
  - name: site
    type: http
    schedule: "@every 300ms"
    url: "` + srv.URL + `/"
    tls: {ca_file: ca.pem}
    breaker: {failures: 0}
    error_after: 1
    conditions:
      - status == 200
      - tls.not_after - now > duration("336h")
`)
	d := in.start()
	eventually(t, 15*time.Second, "error on the certificate", func() error {
		o := d.source("site")
		if o.State != "error" || !strings.Contains(o.ErrorReason, `condition failed: tls.not_after - now > duration("336h") (tls.not_after = `) {
			return errf("%v", o)
		}
		return nil
	})
}

// TestConditionCostLimit (contract 14.4): a condition that loops over a
// 1 MiB JSON array is stopped, failing the poll, not the daemon, which
// polls on.
func TestConditionCostLimit(t *testing.T) {
	t.Parallel()
	big := "[" + strings.Repeat("1,", 512<<10) + "1]"
	var polls atomic.Int64
	up := bodyServer(t, func() string { polls.Add(1); return big })
	in := newInst(t)
	in.writeConfig(`sources:
  - name: loop
    type: http
    schedule: "@every 300ms"
    url: "` + up.URL + `/big"
    breaker: {failures: 0}
    error_after: 0
    conditions: ['body.json.map(x, x * 2).size() > 0']
`)
	d := in.start()
	eventually(t, 20*time.Second, "two polls stopped by the limit", func() error {
		o := d.source("loop")
		// Stopped by the cost limit, or, on a loaded machine, first by the
		// 250 ms bound beside it: either way the poll fails, not the daemon.
		if o.FailuresTotal < 2 || !strings.Contains(o.LastError, "evaluation stopped: ") {
			return errf("%v", o)
		}
		return nil
	})
	if d.exited() {
		t.Fatal("the daemon exited")
	}
}
