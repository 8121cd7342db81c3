package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// ConnectionLevel reports whether err, the error of a request that got no
// answer (no status line), is a connection-level failure of contract 13.3:
// the host could not be reached or refused to talk, so it says something
// about the host rather than about the source. Those are: DNS resolution
// (*net.DNSError), a refused, unreachable, reset or aborted connection, a
// connection closed before any byte of an answer (io.EOF from the request),
// a TLS handshake failure (bad record, untrusted or invalid certificate, a
// TLS alert, the handshake timeout) and a connect timeout (a dial that
// timed out). Not: nil, an HTTP status, a read timeout after the
// connection was made, a cancelled context, or anything else.
//
// Call it only for a request that got no status (the poll's StatusCode is
// 0): a connection reset while a body is read is a failure of that poll,
// and only the error of the request itself tells the two apart.
func ConnectionLevel(err error) bool {
	if err == nil {
		return false
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
			syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EHOSTDOWN, syscall.EPIPE:
			return true
		}
	}
	if tlsFailure(err) || dialTimeout(err) {
		return true
	}
	// The server accepted and closed before answering: net/http reports
	// the request's error as io.EOF, or, when the close came before the
	// request was written, as "server closed idle connection" (no exported
	// type). A body cut short is ErrUnexpectedEOF.
	return errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "server closed idle connection")
}

// tlsFailure reports whether err is a failed TLS handshake.
func tlsFailure(err error) bool {
	var (
		rh       tls.RecordHeaderError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		alert    tls.AlertError
		ech      *tls.ECHRejectionError
	)
	if errors.As(err, &rh) || errors.As(err, &verify) || errors.As(err, &unknown) ||
		errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &alert) ||
		errors.As(err, &ech) {
		return true
	}
	// An alert received from the peer ("remote error: tls: handshake
	// failure") or sent to it is a *net.OpError of these operations.
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error") {
		return true
	}
	// net/http's handshake timeout, and its answer to a plain-HTTP server
	// (a tls.RecordHeaderError it rewrites), have no exported type.
	msg := err.Error()
	return strings.Contains(msg, "TLS handshake timeout") ||
		strings.Contains(msg, "server gave HTTP response to HTTPS client")
}

// dialTimeout reports whether err is a connect timeout: a dial (an
// *net.OpError of Op "dial") that timed out.
func dialTimeout(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	var to interface{ Timeout() bool }
	return errors.As(op, &to) && to.Timeout()
}
