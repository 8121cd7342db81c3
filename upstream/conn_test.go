package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// get sends a GET as pacer's poller does and returns the error with the
// *url.Error unwrapped and rewrapped (the poller keeps the cause, not the
// url.Error), the status (0 without an answer) and the body read's error.
func get(t *testing.T, client *http.Client, target string) (reqErr error, status int, bodyErr error) {
	t.Helper()
	resp, err := client.Get(target)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("GET %s: %w", target, err), 0, nil
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	if err != nil {
		err = fmt.Errorf("reading body: %w", err)
	}
	return nil, resp.StatusCode, err
}

func client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

func TestConnectionLevelRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	reqErr, status, _ := get(t, client(5*time.Second), "http://"+addr+"/")
	if status != 0 || !ConnectionLevel(reqErr) {
		t.Fatalf("closed port: status %d, ConnectionLevel(%v) = false", status, reqErr)
	}
}

func TestConnectionLevelClosedBeforeAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for range 10 { // EOF, a reset or "server closed idle connection", by timing
		reqErr, status, _ := get(t, client(5*time.Second), "http://"+ln.Addr().String()+"/")
		if status != 0 || !ConnectionLevel(reqErr) {
			t.Fatalf("accept and close: status %d, ConnectionLevel(%v) = false", status, reqErr)
		}
	}
	ln.Close()
	<-done
}

func TestConnectionLevelTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors are expected
	srv.StartTLS()
	defer srv.Close()
	reqErr, _, _ := get(t, client(5*time.Second), srv.URL) // a default client: the cert is untrusted
	if !ConnectionLevel(reqErr) {
		t.Fatalf("untrusted cert: ConnectionLevel(%v) = false", reqErr)
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	reqErr, _, _ = get(t, client(5*time.Second), "https://"+plain.Listener.Addr().String()+"/")
	if !ConnectionLevel(reqErr) {
		t.Fatalf("https to a plain server: ConnectionLevel(%v) = false", reqErr)
	}
}

func TestConnectionLevelDNS(t *testing.T) {
	reqErr, _, _ := get(t, client(10*time.Second), "http://no-such-host.invalid/")
	var dns *net.DNSError
	if !errors.As(reqErr, &dns) || !ConnectionLevel(reqErr) {
		t.Fatalf("unresolvable name: ConnectionLevel(%v) = false", reqErr)
	}
}

func TestConnectionLevelDialTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.4:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialer := &net.Dialer{Timeout: time.Nanosecond} // due before the connect completes
	c := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	reqErr, status, _ := get(t, c, "http://"+ln.Addr().String()+"/")
	if status != 0 || !ConnectionLevel(reqErr) {
		t.Fatalf("connect timeout: status %d, ConnectionLevel(%v) = false", status, reqErr)
	}
}

func TestConnectionLevelNotThese(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			w.WriteHeader(http.StatusInternalServerError)
		case "/slow-body": // headers, then nothing until the client gives up
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "/slow-headers":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	defer srv.Close()
	defer close(release)

	reqErr, status, bodyErr := get(t, client(5*time.Second), srv.URL+"/500")
	if reqErr != nil || status != 500 || ConnectionLevel(reqErr) {
		t.Fatalf("500: err %v, status %d", reqErr, status)
	}
	reqErr, status, bodyErr = get(t, client(300*time.Millisecond), srv.URL+"/slow-body")
	if reqErr != nil || status != 200 || bodyErr == nil || ConnectionLevel(bodyErr) {
		t.Fatalf("read timeout after headers: err %v, status %d, body error %v (want a non-connection-level one)", reqErr, status, bodyErr)
	}
	reqErr, status, _ = get(t, client(300*time.Millisecond), srv.URL+"/slow-headers")
	if reqErr == nil || status != 0 || ConnectionLevel(reqErr) {
		t.Fatalf("timeout awaiting headers on a made connection: err %v is connection-level", reqErr)
	}
	if ConnectionLevel(nil) || ConnectionLevel(context.Canceled) || ConnectionLevel(context.DeadlineExceeded) ||
		ConnectionLevel(io.ErrUnexpectedEOF) || ConnectionLevel(errors.New("500 Internal Server Error")) {
		t.Fatal("nil, a cancelled context, a short body or a status is connection-level")
	}
}
