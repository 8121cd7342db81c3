package config

import (
	"bytes"

	"go.yaml.in/yaml/v3"
)

// quickItem builds the node of one item of the sources list (its text, the
// items' indentation ind) without the YAML parser when the item is in the
// plain subset most generated and hand-written lists use; otherwise it
// returns nil and the item is parsed by yaml.v3. The subset: a flow mapping
// on the item's line ("- {name: a, type: http, url: "..."}"), or a block
// mapping whose keys are each on a line of their own at the mapping's
// indentation ("- name: a" then "  type: http"); keys of letters, digits, "_" and "-"; values plain
// scalars of a narrow character set, double-quoted strings of printable
// ASCII without escapes, or flow mappings and lists of those. No comments,
// anchors, tags or multi-line values. The nodes are those yaml.v3 builds
// (kind, tag, style, value; TestQuickItem compares them), without lines:
// the loader uses lines in problems only, and a load with a problem is done
// again from the whole file's node tree (see loadFast).
func quickItem(text []byte, ind int) *yaml.Node {
	lines := bytes.Split(text, []byte("\n"))
	first := bytes.TrimRight(lines[0], " \r")
	if len(first) < ind+3 || first[ind] != '-' || first[ind+1] != ' ' {
		return nil
	}
	for _, ln := range lines[1:] {
		if len(bytes.TrimRight(ln, " \r")) > 0 {
			return quickBlock(lines, ind)
		}
	}
	rest := first[ind+2:]
	if rest[0] != '{' {
		return quickBlock(lines, ind)
	}
	n, pos := flowValue(rest, 0, 0)
	if n == nil || pos != len(rest) {
		return nil
	}
	return n
}

// quickBlock reads a block mapping item (see quickItem).
func quickBlock(lines [][]byte, ind int) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i, ln := range lines {
		ln = bytes.TrimRight(ln, " \r")
		if len(ln) == 0 && i > 0 {
			continue
		}
		if len(ln) < ind+2 || !allSpaces(ln[:ind]) {
			return nil
		}
		if i == 0 && (ln[ind] != '-' || ln[ind+1] != ' ') || i > 0 && (ln[ind] != ' ' || ln[ind+1] != ' ') {
			return nil
		}
		k, v := blockPair(ln[ind+2:])
		if k == nil {
			return nil
		}
		m.Content = append(m.Content, k, v)
	}
	return m
}

// blockPair reads "key: value" of a block mapping line.
func blockPair(s []byte) (k, v *yaml.Node) {
	k, pos := flowKey(s, 0)
	if k == nil || pos+1 >= len(s) || s[pos] != ':' || s[pos+1] != ' ' {
		return nil, nil
	}
	pos = skipSpaces(s, pos+1)
	if pos == len(s) {
		return nil, nil // null values are left to the parser
	}
	switch s[pos] {
	case '{', '[', '"':
		v, pos = flowValue(s, pos, 0)
	default:
		v, pos = plainScalar(s, pos, false)
	}
	if v == nil || pos != len(s) {
		return nil, nil
	}
	return k, v
}

// flowValue reads a value of a flow collection at s[pos:] (a mapping, a
// list, a double-quoted or a plain scalar) and the spaces after it.
func flowValue(s []byte, pos, depth int) (*yaml.Node, int) {
	if pos >= len(s) || depth > 3 {
		return nil, 0
	}
	var n *yaml.Node
	switch s[pos] {
	case '{', '[':
		n, pos = flowCollection(s, pos, depth)
	case '"':
		n, pos = quoted(s, pos)
	default:
		n, pos = plainScalar(s, pos, true)
	}
	if n == nil {
		return nil, 0
	}
	return n, skipSpaces(s, pos)
}

// flowCollection reads "{k: v, ...}" or "[v, ...]" at s[pos:].
func flowCollection(s []byte, pos, depth int) (*yaml.Node, int) {
	mapping := s[pos] == '{'
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	end := byte(']')
	if mapping {
		n.Kind, n.Tag, end = yaml.MappingNode, "!!map", '}'
	}
	pos = skipSpaces(s, pos+1)
	for pos < len(s) && s[pos] != end {
		if mapping {
			k, p := flowKey(s, pos)
			if k == nil || p+1 >= len(s) || s[p] != ':' || s[p+1] != ' ' {
				return nil, 0
			}
			n.Content = append(n.Content, k)
			pos = skipSpaces(s, p+1)
		}
		v, p := flowValue(s, pos, depth+1)
		if v == nil {
			return nil, 0
		}
		n.Content = append(n.Content, v)
		pos = p
		if pos < len(s) && s[pos] == ',' {
			pos = skipSpaces(s, pos+1)
			if pos < len(s) && s[pos] == end {
				return nil, 0 // a trailing comma: left to the parser
			}
		} else if pos >= len(s) || s[pos] != end {
			return nil, 0
		}
	}
	if pos >= len(s) {
		return nil, 0
	}
	return n, pos + 1
}

// flowKey reads a key [A-Za-z_][A-Za-z0-9_-]* at s[pos:]; its tag is the
// one yaml.v3 resolves.
func flowKey(s []byte, pos int) (*yaml.Node, int) {
	start := pos
	for ; pos < len(s); pos++ {
		c := s[pos]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || pos > start && (c >= '0' && c <= '9' || c == '-') {
			continue
		}
		break
	}
	if pos == start {
		return nil, 0
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: string(s[start:pos])}
	n.Tag = n.ShortTag()
	return n, pos
}

// quoted reads a double-quoted string of printable ASCII without escapes.
func quoted(s []byte, pos int) (*yaml.Node, int) {
	for i := pos + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: string(s[pos+1 : i])}, i + 1
		case c == '\\' || c < 0x20 || c > 0x7e:
			return nil, 0
		}
	}
	return nil, 0
}

// plainScalar reads a plain scalar of letters, digits and "_./+-" (also
// "@" and, outside flow collections, ":" not followed by a space) that
// starts with a letter, a digit, "_", "." or "/"; its tag is the one
// yaml.v3 resolves.
func plainScalar(s []byte, pos int, flow bool) (*yaml.Node, int) {
	start := pos
	for ; pos < len(s); pos++ {
		c := s[pos]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' {
			continue
		}
		if pos > start && (c == '+' || c == '-' || c == '@' || !flow && c == ':' && pos+1 < len(s) && s[pos+1] != ' ') {
			continue
		}
		break
	}
	if pos == start {
		return nil, 0
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: string(s[start:pos])}
	n.Tag = n.ShortTag()
	return n, pos
}

// skipSpaces returns the index of the first byte at or after pos that is
// not a space.
func skipSpaces(s []byte, pos int) int {
	for pos < len(s) && s[pos] == ' ' {
		pos++
	}
	return pos
}

// allSpaces reports whether s is spaces only.
func allSpaces(s []byte) bool { return skipSpaces(s, 0) == len(s) }
