package config

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// NameToken is replaced by the source's name in deliver.file.
const NameToken = "{name}"

// Deliver is where a source's changed results go (contract 9.3): one or
// more targets, delivered in the order file, command, webhook.
type Deliver struct {
	// File is an absolute path with {name} replaced, or "" for none.
	File string
	// Command is an argv (no shell) whose program is resolved like an exec
	// source's, or nil for none.
	Command []string
	// Webhook is the HTTP target, or nil for none.
	Webhook *Webhook
	// Always delivers every successful result (when: always), not only a
	// changed one; the source's GETs are then unconditional.
	Always bool
}

// Webhook is an HTTP target of deliver and of notify. Its header values and the password
// of its URL are secrets (registered with the Redactor).
type Webhook struct {
	URL     string
	Method  string // upper case, default POST
	Headers map[string]string
}

// DefaultWebhookMethod is the method of a webhook without one.
const DefaultWebhookMethod = "POST"

// deliverSpec is the deliver block being read: the default's, replaced
// whole by a source's own. File still holds {name}.
type deliverSpec struct {
	d *Deliver // nil: no delivery (a source's deliver: null turns an inherited block off)
}

// deliverKey reads the deliver key into d; it reports whether key is it.
func (l *blockReader) deliverKey(d *deliverSpec, p pair, kp path) bool {
	if p.key != "deliver" {
		return false
	}
	*d = deliverSpec{d: l.deliverBlock(p.val, kp)}
	return true
}

// deliverBlock reads a deliver block; null is no delivery, and a block
// without a target is a problem.
func (l *blockReader) deliverBlock(n *yaml.Node, where path) *Deliver {
	if isNull(n) {
		return nil
	}
	ps, ok := l.pairs(n, where)
	if !ok {
		return nil
	}
	d := &Deliver{}
	for _, p := range ps {
		kp := where.key(p.key)
		switch p.key {
		case "file":
			d.File = l.deliverFile(p.val, kp)
		case "command":
			d.Command = l.command(p.val, kp)
		case "webhook":
			d.Webhook = l.webhook(p.val, kp)
		case "when":
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				switch strings.TrimSpace(v) {
				case "changed":
				case "always":
					d.Always = true
				default:
					l.addf(kp, "must be changed or always, got %q", v)
				}
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
	if !hasKey(ps, "file") && !hasKey(ps, "command") && !hasKey(ps, "webhook") {
		l.addf(where, "needs at least one target: file, command or webhook")
	}
	return d
}

// deliverFile reads deliver.file: a path (made absolute once {name} is
// replaced, see finishDeliver) that does not name a directory.
func (l *blockReader) deliverFile(n *yaml.Node, kp path) string {
	v, ok := l.scalar(n, kp, "a path")
	if !ok {
		return ""
	}
	switch {
	case strings.TrimSpace(v) == "":
		l.addf(kp, "must not be empty")
	case strings.ContainsRune(v, 0):
		l.addf(kp, "contains a NUL byte")
	case strings.HasSuffix(v, "/") || strings.HasSuffix(v, "/.") || strings.HasSuffix(v, "/..") || v == "." || v == "..":
		l.addf(kp, "must name a file, not a directory")
	default:
		return v
	}
	return ""
}

// webhook reads deliver.webhook and notify.webhook: url (http or https, required), method
// (default POST) and headers (secrets, like a source's).
func (l *blockReader) webhook(n *yaml.Node, where path) *Webhook {
	ps, ok := l.pairs(n, where)
	if !ok || isNull(n) {
		if ok {
			l.addf(where, "must be a mapping with a url")
		}
		return nil
	}
	w := &Webhook{Method: DefaultWebhookMethod}
	for _, p := range ps {
		kp := where.key(p.key)
		switch p.key {
		case "url":
			w.URL = l.httpURL(p.val, kp, w.URL)
		case "method":
			w.Method = l.httpMethod(p.val, kp, w.Method)
		case "headers":
			w.Headers = l.headers(p.val, kp)
		default:
			l.addf(kp, "unknown key")
		}
	}
	if !hasKey(ps, "url") {
		l.addf(where.key("url"), "required")
	}
	return w
}

// finishDeliver gives s its deliver block: its own or the inherited one,
// with {name} in file replaced by the source's name and the path resolved
// against the config file's directory.
func (l *blockReader) finishDeliver(s *Source, d *deliverSpec) {
	if d.d == nil {
		return
	}
	own := *d.d
	if own.File != "" {
		own.File = l.resolve(strings.ReplaceAll(own.File, NameToken, s.Name))
	}
	s.Deliver = &own
}

// digest is the deliver block's part of the source's fingerprint ("" for
// none, so that fingerprints stored before deliver existed stay valid).
func (d *Deliver) digest() string {
	if d == nil {
		return ""
	}
	h := sha256.New()
	fpFields(h, "deliver/1", d.File, strconv.FormatBool(d.Always), strconv.Itoa(len(d.Command)))
	fpFields(h, d.Command...)
	if w := d.Webhook; w != nil {
		fpFields(h, "webhook", w.URL, w.Method, strconv.Itoa(len(w.Headers)))
		for _, k := range slices.Sorted(maps.Keys(w.Headers)) {
			fpFields(h, k, w.Headers[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// httpURL reads an http(s) URL (a source's, a webhook's): its password is
// a secret, and a URL that is not usable is a problem at kp. It returns
// old when the value is not a string.
func (l *valueReader) httpURL(n *yaml.Node, kp path, old string) string {
	v, ok := l.scalar(n, kp, "a URL")
	if !ok {
		return old
	}
	l.userinfo(v)
	l.checkURL(v, kp)
	return v
}

// httpMethod reads an HTTP method, upper-cased; an invalid one is a
// problem at kp and leaves old.
func (l *valueReader) httpMethod(n *yaml.Node, kp path, old string) string {
	v, ok := l.scalar(n, kp, "a string")
	switch {
	case !ok:
		return old
	case !isToken(v):
		l.addf(kp, "invalid HTTP method %q", v)
		return old
	}
	return strings.ToUpper(v)
}
