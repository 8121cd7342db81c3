package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pacer-dev/pacer/conditions"
)

// conditionSpec is the conditions and select being read (contract section
// 14): those of defaults, then a source's own, each key replacing the
// inherited one whole.
type conditionSpec struct {
	conds []string
	sel   string
}

// conditionKey reads conditions or select into c; it reports whether key
// is one of them.
func (l *blockReader) conditionKey(c *conditionSpec, p pair, kp path) bool {
	switch p.key {
	case "conditions":
		c.conds = l.expressions(p.val, kp)
	case "select":
		c.sel = ""
		if !isNull(p.val) {
			if v, ok := l.scalar(p.val, kp, "a CEL expression"); ok {
				c.sel = v
			}
		}
	default:
		return false
	}
	return true
}

// expressions reads a list of conditions (CEL expressions as strings).
func (l *blockReader) expressions(n *yaml.Node, kp path) []string {
	items, _ := l.items(n, kp)
	if len(items) == 0 {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		if v, ok := l.scalar(it, kp.index(i), "a CEL expression"); ok {
			out = append(out, v)
		}
	}
	return out
}

// finishConditions gives s its conditions and select and compiles them for
// its kind (http://, https or exec), once per expression and load; each
// problem is reported at its path with its column.
func (l *sourceReader) finishConditions(s *Source, c *conditionSpec, prefix path) {
	if len(c.conds) == 0 && c.sel == "" {
		return
	}
	s.Conditions, s.Select = c.conds, c.sel
	var kind conditions.Kind
	switch {
	case s.Type == "exec":
		kind = conditions.Exec
	case s.Type != "http":
		return // reported already
	case len(s.URL) >= 8 && strings.EqualFold(s.URL[:8], "https://"):
		kind = conditions.HTTPS
	default:
		kind = conditions.HTTP
	}
	if l.exprs == nil {
		l.exprs = conditions.NewCompiler(l.prevExprs)
	}
	set, probs := l.exprs.Compile(kind, c.conds, c.sel)
	for _, p := range probs {
		switch {
		case p.Index == -1:
			l.addf(prefix.key("select"), "%s", p)
		case p.Index < 0:
			l.addf(prefix.key("conditions"), "%s", p)
		default:
			l.addf(prefix.key("conditions").index(p.Index), "%s", p)
		}
	}
	s.Checks = set
}

// conditionsDigest is the conditions' and select's part of a source's
// fingerprint ("" for none, so that fingerprints stored before conditions
// existed stay valid).
func conditionsDigest(s *Source) string {
	if len(s.Conditions) == 0 && s.Select == "" {
		return ""
	}
	h := sha256.New()
	fpFields(h, "conditions/1", strconv.Itoa(len(s.Conditions)))
	fpFields(h, s.Conditions...)
	fpFields(h, "select", s.Select)
	return hex.EncodeToString(h.Sum(nil))
}
