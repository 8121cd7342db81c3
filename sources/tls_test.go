package sources

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// okHandler answers 200.
func okHandler(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }

// pollSource loads one http source named x with url and the extra keys
// (YAML flow mapping members) and polls it once over p, redacting with the
// config's Redactor.
func pollSource(t *testing.T, p *Transports, dir, url, keys string) Result {
	t.Helper()
	if keys != "" {
		keys = ", " + keys
	}
	cfg := loadConfig(t, dir, fmt.Sprintf(`sources: [{name: x, type: http, url: %q, headers: {X-Key: "${SECRET}"}%s}]`, url, keys))
	res, _ := pollWithin(t, NewHTTP(cfg.Sources[0], NewClient(p, nil), cfg.Redactor().Redact), 10*time.Second)
	return res
}

// TestTLSVerification: ca_file, server_name, insecure_skip_verify and
// min_version take effect, and an x509 failure is the poll's error with its
// reason (redaction keeps it).
func TestTLSVerification(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "private CA")
	writeTestFile(t, dir, "ca.pem", ca.pem)
	good := newTLSServer(t, ca.serverCert(t, leaf{cn: "api", dns: []string{"api.internal"}, ips: loopback()}), nil, http.HandlerFunc(okHandler))
	nameOnly := newTLSServer(t, ca.serverCert(t, leaf{cn: "api", dns: []string{"api.internal"}}), nil, http.HandlerFunc(okHandler))
	expired := newTLSServer(t, ca.serverCert(t, leaf{cn: "old", ips: loopback(),
		notBefore: time.Now().Add(-48 * time.Hour), notAfter: time.Now().Add(-time.Hour)}), nil, http.HandlerFunc(okHandler))
	tls12 := newTLSServer(t, ca.serverCert(t, leaf{cn: "api", ips: loopback()}),
		func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }, http.HandlerFunc(okHandler))
	p := newTestTransports(t, 2)
	tests := []struct {
		name, url, tls string
		err            string // "" = success; else in the error after "GET URL: "
	}{
		{"ca_file", good.URL, `{ca_file: ca.pem}`, ""},
		{"system roots", good.URL, ``, "tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"server_name", nameOnly.URL, `{ca_file: ca.pem, server_name: api.internal}`, ""},
		{"no IP SAN", nameOnly.URL, `{ca_file: ca.pem}`, "x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"},
		{"name mismatch", nameOnly.URL, `{ca_file: ca.pem, server_name: other.internal}`, "x509: certificate is valid for api.internal, not other.internal"},
		{"expired", expired.URL, `{ca_file: ca.pem}`, "x509: certificate has expired or is not yet valid"},
		{"insecure_skip_verify", expired.URL, `{insecure_skip_verify: true}`, ""},
		{"min_version met", tls12.URL, `{ca_file: ca.pem, min_version: "1.2"}`, ""},
		{"min_version not met", tls12.URL, `{ca_file: ca.pem, min_version: "1.3"}`, "protocol version not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := ""
			if tt.tls != "" {
				keys = "tls: " + tt.tls
			}
			res := pollSource(t, p, dir, tt.url, keys)
			got := errText(res.Err)
			switch {
			case tt.err == "" && res.Err != nil:
				t.Fatalf("want success, got %s", got)
			case tt.err != "" && (!strings.HasPrefix(got, "GET "+tt.url+": ") || !strings.Contains(got, tt.err)):
				t.Fatalf("error %q, want GET %s: ...%s...", got, tt.url, tt.err)
			}
		})
	}
}

// TestMTLS: a server requiring a client certificate of its CA accepts the
// source presenting cert_file and key_file, and refuses one without.
func TestMTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := newTestCA(t, "server CA"), newTestCA(t, "client CA")
	writeTestFile(t, dir, "ca.pem", serverCA.pem)
	cert, key := clientCA.issue(t, leaf{cn: "pacer-client", client: true})
	writeTestFile(t, dir, "client.pem", cert)
	writeTestFile(t, dir, "client.key", key)
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
	var mu sync.Mutex
	var seen []string
	srv := newTLSServer(t, serverCA.serverCert(t, leaf{cn: "api", ips: loopback()}), func(c *tls.Config) {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].Subject.CommonName)
		mu.Unlock()
	}))
	p := newTestTransports(t, 2)
	if res := pollSource(t, p, dir, srv.URL, `tls: {ca_file: ca.pem, cert_file: client.pem, key_file: client.key}`); res.Err != nil {
		t.Fatalf("with a client certificate: %v", res.Err)
	}
	res := pollSource(t, p, dir, srv.URL, `tls: {ca_file: ca.pem}`)
	if got := errText(res.Err); !strings.Contains(got, "tls: ") || !strings.Contains(got, "certificate") {
		t.Fatalf("without a client certificate: %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "pacer-client" {
		t.Errorf("server saw client certificates %q", seen)
	}
}

// TestHTTP2Setting: the transport negotiates HTTP/2 unless http2 is false.
func TestHTTP2Setting(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "CA")
	writeTestFile(t, dir, "ca.pem", ca.pem)
	protos := make(chan string, 4)
	srv := newTLSServerH2(t, ca.serverCert(t, leaf{cn: "api", ips: loopback()}), func(w http.ResponseWriter, r *http.Request) {
		protos <- r.Proto
	})
	p := newTestTransports(t, 2)
	for _, tt := range []struct{ keys, want string }{
		{`tls: {ca_file: ca.pem}`, "HTTP/2.0"},
		{`tls: {ca_file: ca.pem}, http2: true`, "HTTP/2.0"},
		{`tls: {ca_file: ca.pem}, http2: false`, "HTTP/1.1"},
	} {
		if res := pollSource(t, p, dir, srv.URL, tt.keys); res.Err != nil {
			t.Fatalf("%s: %v", tt.keys, res.Err)
		}
		if got := <-protos; got != tt.want {
			t.Errorf("%s: server saw %s, want %s", tt.keys, got, tt.want)
		}
	}
}

// newTLSServerH2 is newTLSServer with HTTP/2 enabled.
func newTLSServerH2(t *testing.T, cert tls.Certificate, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
