package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// isHTTPKey reports whether key is a source key for type http only.
func isHTTPKey(key string) bool {
	switch key {
	case "url", "method", "headers", "body", "expect_status", "max_body", "basic_auth", "bearer_token_file":
		return true
	}
	return false
}

// isExecKey reports whether key is a source key for type exec only.
func isExecKey(key string) bool {
	switch key {
	case "command", "env", "dir":
		return true
	}
	return false
}

// validName reports whether s is a valid source or group name: at most
// MaxNameLen bytes matching [a-z0-9][a-z0-9._-]*.
func validName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			continue
		}
		if i == 0 || (c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// sourceName reads a source's name without reporting anything; expanded
// says it came from a ${VAR} (it then holds a secret, and problems name the
// source by its index).
func (l *sourceReader) sourceName(n *yaml.Node) (name string, expanded bool) {
	// The common case: a mapping without merge keys whose name is a plain
	// string. The first such key is the one pairs would return.
	if d := deref(n); d != nil && d.Kind == yaml.MappingNode {
		var val *yaml.Node
		merges := false
		for i := 0; i+1 < len(d.Content); i += 2 {
			k := deref(d.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode {
				continue // reported by source
			}
			if k.ShortTag() == "!!merge" {
				merges = true
				continue
			}
			if k.Value == "name" {
				val = d.Content[i+1]
				break
			}
		}
		if val == nil && !merges {
			return "", false
		}
		if v := deref(val); v != nil && v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null" && !strings.Contains(v.Value, "$") {
			return v.Value, false
		}
	}
	q := &decoder{reporter: &reporter{quiet: true}, dir: l.dir, env: l.env}
	ps, _ := q.pairs(n, path{})
	for _, p := range ps {
		if p.key == "name" {
			v, _ := q.scalar(p.val, path{}, "")
			d := deref(p.val)
			return v, d != nil && strings.Contains(d.Value, "${")
		}
	}
	return "", false
}

// sources returns the sources and an index of them by name (valid only when
// no problem is reported, which is the only case where Load returns it).
// With dst (a source file's sources, see readSourceFiles) they are appended
// to dst and no index is built.
func (l *sourceReader) sources(dst []*Source, n *yaml.Node, b inherited, groups map[string]bool) ([]*Source, map[string]int) {
	items, _ := l.items(n, at("sources"))
	names := make([]string, len(items))
	first := make(map[string]int, len(items)) // name -> index of its first source
	var dup map[string]bool                   // names of more than one source
	var secretName map[int]bool               // sources whose name came from a ${VAR}
	for i, it := range items {
		var expanded bool
		names[i], expanded = l.sourceName(it)
		if expanded {
			if secretName == nil {
				secretName = map[int]bool{}
			}
			secretName[i] = true
		}
		if names[i] == "" {
			continue
		}
		if _, ok := first[names[i]]; !ok {
			first[names[i]] = i
		} else {
			if dup == nil {
				dup = map[string]bool{}
			}
			dup[names[i]] = true
		}
	}
	out := dst
	if out == nil {
		out = make([]*Source, 0, len(items))
	}
	for i, it := range items {
		prefix := sourcePath(i, "")
		if !dup[names[i]] && validName(names[i]) && !secretName[i] {
			prefix = sourcePath(i, names[i])
		}
		if dup[names[i]] && first[names[i]] != i {
			l.addf(sourcePath(i, "").key("name"), "duplicate name %q (also used by sources[%d])", names[i], first[names[i]])
		} else if other, taken := l.claimName(names[i], i); taken {
			// In another file (source_files.go): both places are named.
			prefix = sourcePath(i, "")
			l.addf(prefix.key("name"), "duplicate name %q (also used by %s)", names[i], other)
		}
		if s, ok := l.source(it, prefix, b, groups); ok {
			out = append(out, l.arena.keep(&s))
		}
	}
	if dst != nil {
		return out, nil
	}
	if len(out) != len(items) || len(first) != len(out) {
		// Not every source made it: Load fails, but keep the index right.
		first = make(map[string]int, len(out))
		for i := range out {
			first[out[i].Name] = i
		}
	}
	return out, first
}

// source reads one source: its name and type first, then every other key
// (a key of the other type is a problem), then what its type requires.
func (l *sourceReader) source(n *yaml.Node, prefix path, b inherited, groups map[string]bool) (Source, bool) {
	ps, ok := l.pairs(n, prefix)
	if !ok {
		return Source{}, false
	}
	s := Source{Method: DefaultMethod, MaxBody: DefaultMaxBody}
	before := l.placeholders
	l.nameAndType(&s, ps, prefix)
	for _, p := range ps {
		kp := prefix.key(p.key)
		switch {
		case p.key == "name" || p.key == "type":
		case p.key == "limit":
			l.limit(&s, p.val, kp, groups)
		case p.key == "depends_on":
			s.DependsOn = l.dependsOn(p.val, kp)
		case isHTTPKey(p.key) || isExecKey(p.key):
			l.typedKey(&s, p, kp)
		case !l.common(&b, p, prefix):
			l.unknownKey(kp, p.key, sourceKeys())
		}
	}
	l.requireTypeKeys(&s, ps, prefix)
	l.finishClient(&s, &b.client, prefix)
	l.finishResults(&s, &b.results)
	if s.Type == "http" {
		s.Host, _ = HostOf(s.URL)
	}
	l.finishDeliver(&s, &b.deliver)
	l.finishConditions(&s, &b.conds, prefix)
	s.ScheduleSpec, s.Schedule = b.scheduleSpec, b.schedule
	s.Timeout, s.Backoff, s.Breaker, s.ErrorAfter = b.timeout, b.backoff, b.breaker, b.errorAfter
	if !b.placeholder && l.placeholders == before {
		s.Fingerprint = l.fp.fingerprint(&s)
	} // else "" (unknown): a value is a placeholder (Options.ForStore)
	return s, true
}

// nameAndType reads the name and type keys of a source, which the other
// keys depend on, and reports them when absent.
func (l *sourceReader) nameAndType(s *Source, ps []pair, prefix path) {
	var hasName, hasType bool
	for _, p := range ps {
		switch p.key {
		case "name":
			hasName = true
			kp := prefix.key("name")
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				s.Name = v
				if !validName(v) {
					l.addf(kp, "invalid name %q: must match [a-z0-9][a-z0-9._-]* and be at most %d characters", v, MaxNameLen)
				}
			}
		case "type":
			hasType = true
			kp := prefix.key("type")
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				if v != "http" && v != "exec" {
					l.addf(kp, "must be http or exec, got %q", v)
				} else {
					s.Type = v
				}
			}
		}
	}
	if !hasName {
		l.addf(prefix.key("name"), "required")
	}
	if !hasType {
		l.addf(prefix.key("type"), "required (http or exec)")
	}
}

// limit reads a source's limit group, which limits must declare.
func (l *sourceReader) limit(s *Source, n *yaml.Node, kp path, groups map[string]bool) {
	if v, ok := l.scalar(n, kp, "a string"); ok {
		if !groups[v] {
			l.addf(kp, "unknown limit group %q (not defined in limits)", v)
		} else {
			s.Limit = v
		}
	}
}

// typedKey hands a key of one source type to that type's handler (httpKey
// or execKey). A key of the other type is a problem; while the type is
// unknown (missing or invalid), keys of both are read.
func (l *sourceReader) typedKey(s *Source, p pair, kp path) {
	switch {
	case (s.Type == "exec" && isHTTPKey(p.key)) || (s.Type == "http" && isExecKey(p.key)):
		l.addf(kp, "not allowed for type %s", s.Type)
	case isHTTPKey(p.key):
		l.httpKey(s, p, kp)
	default:
		l.execKey(s, p, kp)
	}
}

// requireTypeKeys reports the key that a source's type requires when it is
// absent (url for http, command for exec), and clears the http-only fields
// of an exec source.
func (l *sourceReader) requireTypeKeys(s *Source, ps []pair, prefix path) {
	switch s.Type {
	case "http":
		if !hasKey(ps, "url") {
			l.addf(prefix.key("url"), "required for type http")
		}
	case "exec":
		if !hasKey(ps, "command") {
			l.addf(prefix.key("command"), "required for type exec")
		}
		// http-only fields stay zero for exec sources.
		s.Method, s.MaxBody = "", 0
	}
}

// hasKey reports whether key is one of the keys of ps.
func hasKey(ps []pair, key string) bool {
	for _, p := range ps {
		if p.key == key {
			return true
		}
	}
	return false
}
