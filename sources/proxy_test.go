package sources

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingProxy is a loopback HTTP proxy that records what goes through
// it: it forwards absolute-form requests (http:// targets) and tunnels
// CONNECT (https:// targets).
type recordingProxy struct {
	mu    sync.Mutex
	seen  []string // "GET http://host/path", "CONNECT host:port"
	auths []string // their Proxy-Authorization
	fwd   *http.Transport
}

// newRecordingProxy starts a recordingProxy, closed at the end of the test.
func newRecordingProxy(t *testing.T) (*recordingProxy, *httptest.Server) {
	t.Helper()
	p := &recordingProxy{fwd: &http.Transport{}}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.fwd.CloseIdleConnections() })
	return p, srv
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if r.Method == http.MethodConnect {
		p.seen = append(p.seen, "CONNECT "+r.Host)
	} else {
		p.seen = append(p.seen, r.Method+" "+r.URL.String())
	}
	p.auths = append(p.auths, r.Header.Get("Proxy-Authorization"))
	p.mu.Unlock()
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for k, v := range r.Header {
		if !strings.HasPrefix(k, "Proxy-") {
			out.Header[k] = v
		}
	}
	resp, err := p.fwd.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// tunnel connects the client to r.Host until either side closes.
func (p *recordingProxy) tunnel(w http.ResponseWriter, r *http.Request) {
	dst, err := net.DialTimeout("tcp", r.Host, 5*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		dst.Close()
		return
	}
	io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(dst, brw)
		dst.Close()
	}()
	io.Copy(conn, dst)
	conn.Close()
	<-done
}

// log returns what went through the proxy so far.
func (p *recordingProxy) log() (seen, auths []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...), append([]string(nil), p.auths...)
}

// TestProxy: proxy_url sends a plain request through the proxy (with its
// credentials), and an https one to an mTLS server behind a private CA
// through a CONNECT tunnel, with a bearer token from a file; without
// proxy_url the proxy sees nothing; a proxy that is down fails the poll
// without showing its password.
func TestProxy(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := newTestCA(t, "server CA"), newTestCA(t, "client CA")
	writeTestFile(t, dir, "ca.pem", serverCA.pem)
	cert, key := clientCA.issue(t, leaf{cn: "pacer-client", client: true})
	writeTestFile(t, dir, "client.pem", cert)
	writeTestFile(t, dir, "client.key", key)
	writeTestFile(t, dir, "api.token", []byte("tok-from-file\n"))
	writeTestFile(t, dir, "billing.pw", []byte("pw-from-file\n"))
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
	var mu sync.Mutex
	var got []string // Authorization seen by the servers
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Authorization"))
	})
	plain := newServer(t, record)
	mtls := newTLSServer(t, serverCA.serverCert(t, leaf{cn: "api", ips: loopback()}), func(c *tls.Config) {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}, record)
	proxy, proxySrv := newRecordingProxy(t)
	proxyURL := "http://pacer:proxy-s3cr3t@" + proxySrv.Listener.Addr().String()
	p := newTestTransports(t, 2)

	res := pollSource(t, p, dir, plain.URL+"/health", fmt.Sprintf(`proxy_url: %q, basic_auth: {username: pacer, password_file: billing.pw}`, proxyURL))
	if res.Err != nil {
		t.Fatalf("http through the proxy: %v", res.Err)
	}
	res = pollSource(t, p, dir, mtls.URL+"/api", fmt.Sprintf(`proxy_url: %q, bearer_token_file: api.token, tls: {ca_file: ca.pem, cert_file: client.pem, key_file: client.key}`, proxyURL))
	if res.Err != nil {
		t.Fatalf("mTLS through the proxy: %v", res.Err)
	}
	if res := pollSource(t, p, dir, plain.URL+"/direct", ""); res.Err != nil {
		t.Fatalf("direct: %v", res.Err)
	}
	seen, auths := proxy.log()
	wantSeen := []string{"GET " + plain.URL + "/health", "CONNECT " + mtls.Listener.Addr().String()}
	proxyAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("pacer:proxy-s3cr3t"))
	if strings.Join(seen, "\n") != strings.Join(wantSeen, "\n") || len(auths) != 2 || auths[0] != proxyAuth || auths[1] != proxyAuth {
		t.Errorf("proxy saw %q with %q, want %q with the proxy credentials", seen, auths, wantSeen)
	}
	mu.Lock()
	wantAuth := []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("pacer:pw-from-file")), "Bearer tok-from-file", ""}
	if strings.Join(got, "\n") != strings.Join(wantAuth, "\n") {
		t.Errorf("servers saw Authorization %q, want %q", got, wantAuth)
	}
	mu.Unlock()

	down := newServer(t, okHandler)
	downURL := "http://pacer:proxy-s3cr3t@" + down.Listener.Addr().String()
	down.Close()
	res = pollSource(t, p, dir, plain.URL+"/x", fmt.Sprintf(`proxy_url: %q`, downURL))
	if e := errText(res.Err); !strings.Contains(e, "proxyconnect") || strings.Contains(e, "proxy-s3cr3t") {
		t.Errorf("proxy down: %s", e)
	}
}
