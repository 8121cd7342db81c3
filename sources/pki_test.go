package sources

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// leaf describes a certificate that a testCA issues.
type leaf struct {
	cn        string
	dns       []string
	ips       []net.IP
	client    bool      // for client authentication (else server)
	notBefore time.Time // zero: an hour ago
	notAfter  time.Time // zero: in a day
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newTestCA returns a new self-signed CA named cn.
func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for l and its key, both PEM.
func (ca *testCA) issue(t *testing.T, l leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	if l.notBefore.IsZero() {
		l.notBefore = time.Now().Add(-time.Hour)
	}
	if l.notAfter.IsZero() {
		l.notAfter = time.Now().Add(24 * time.Hour)
	}
	usage := x509.ExtKeyUsageServerAuth
	if l.client {
		usage = x509.ExtKeyUsageClientAuth
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: l.cn}, DNSNames: l.dns, IPAddresses: l.ips,
		NotBefore: l.notBefore, NotAfter: l.notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})
}

// serverCert returns a server certificate of ca for l.
func (ca *testCA) serverCert(t *testing.T, l leaf) tls.Certificate {
	t.Helper()
	c, k := ca.issue(t, l)
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// loopback returns the IP of the test servers.
func loopback() []net.IP { return []net.IP{net.IPv4(127, 0, 0, 1)} }

// newTLSServer starts a TLS server on loopback presenting cert; conf, if
// not nil, adjusts its tls.Config (client certificates, versions).
func newTLSServer(t *testing.T, cert tls.Certificate, conf func(*tls.Config), h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if conf != nil {
		conf(srv.TLS)
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// writeTestFile writes data to dir/name and returns its path.
func writeTestFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadConfig writes yaml to dir/config.yaml and loads it, with the
// environment SECRET=s3cr3t.
func loadConfig(t *testing.T, dir, yaml string) *config.Config {
	t.Helper()
	p := writeTestFile(t, dir, "config.yaml", []byte(yaml))
	cfg, err := config.Load(p, func(k string) (string, bool) {
		if k == "SECRET" {
			return "s3cr3t", true
		}
		return "", false
	})
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yaml, err)
	}
	return cfg
}

// newTestTransports returns a Transports whose idle connections are closed
// at the end of the test.
func newTestTransports(t *testing.T, maxConns int) *Transports {
	t.Helper()
	p := NewTransports(maxConns)
	t.Cleanup(p.CloseIdleConnections)
	return p
}
