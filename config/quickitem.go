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
func quickItem(text []byte, ind int, a *nodeArena) *yaml.Node {
	mark := a.mark()
	n := a.item(text, ind)
	if n == nil {
		a.reset(mark)
	}
	return n
}

// nodeArena allocates the nodes of quickItem, and their children slices, in
// blocks: a batch's nodes are garbage together once its sources are read.
type nodeArena struct {
	nodes []yaml.Node
	ptrs  []*yaml.Node
}

// arenaBlock is the largest number of nodes (and of children pointers) per
// block; blocks start small and double (a reload parses a few items).
const arenaBlock = 4096

// arenaMark is where an arena was, to return to when an item is not taken.
type arenaMark struct{ nodes, ptrs int }

func (a *nodeArena) mark() arenaMark { return arenaMark{len(a.nodes), len(a.ptrs)} }

// reset drops what was allocated since m (in the current blocks).
func (a *nodeArena) reset(m arenaMark) {
	if m.nodes <= len(a.nodes) {
		clear(a.nodes[m.nodes:])
		a.nodes = a.nodes[:m.nodes]
	}
	if m.ptrs <= len(a.ptrs) {
		clear(a.ptrs[m.ptrs:])
		a.ptrs = a.ptrs[:m.ptrs]
	}
}

// node returns a new node.
func (a *nodeArena) node(kind yaml.Kind, tag string, style yaml.Style, value string) *yaml.Node {
	if len(a.nodes) == cap(a.nodes) {
		a.nodes = make([]yaml.Node, 0, min(arenaBlock, max(16, 2*cap(a.nodes))))
	}
	a.nodes = append(a.nodes, yaml.Node{Kind: kind, Tag: tag, Style: style, Value: value})
	return &a.nodes[len(a.nodes)-1]
}

// children returns an empty slice for up to n children (more are appended
// as usual).
func (a *nodeArena) children(n int) []*yaml.Node {
	if n > arenaBlock/4 {
		return make([]*yaml.Node, 0, n)
	}
	if cap(a.ptrs)-len(a.ptrs) < n {
		a.ptrs = make([]*yaml.Node, 0, min(arenaBlock, max(n, 32, 2*cap(a.ptrs))))
	}
	start := len(a.ptrs)
	a.ptrs = a.ptrs[:start+n]
	return a.ptrs[start : start : start+n]
}

// item is quickItem without the reset.
func (a *nodeArena) item(text []byte, ind int) *yaml.Node {
	q := quickParser{s: text, a: a}
	first, next := q.line(0)
	if first-0 < ind+3 || text[ind] != '-' || text[ind+1] != ' ' {
		return nil
	}
	for p := next; p < len(text); {
		e, n := q.line(p)
		if e > p {
			return q.block(ind)
		}
		p = n
	}
	if text[ind+2] != '{' {
		return q.block(ind)
	}
	q.end = first
	n, pos := q.flowValue(ind+2, 0)
	if n == nil || pos != first {
		return nil
	}
	return n
}

// quickParser reads one item: s is its text, end the end of the line being
// read (trailing spaces and "\r" excluded).
type quickParser struct {
	s   []byte
	end int
	a   *nodeArena
}

// line returns the end of the line at p without its trailing spaces and
// "\r", and the start of the next line.
func (q *quickParser) line(p int) (end, next int) {
	next = len(q.s)
	if i := bytes.IndexByte(q.s[p:], '\n'); i >= 0 {
		next = p + i + 1
		end = p + i
	} else {
		end = next
	}
	for end > p && (q.s[end-1] == ' ' || q.s[end-1] == '\r') {
		end--
	}
	return end, next
}

// block reads a block mapping item (see quickItem).
func (q *quickParser) block(ind int) *yaml.Node {
	lines := bytes.Count(q.s, []byte("\n")) + 1
	m := q.a.node(yaml.MappingNode, "!!map", 0, "")
	m.Content = q.a.children(2 * lines)
	for p, i := 0, 0; p < len(q.s); i++ {
		end, next := q.line(p)
		if end == p && i > 0 {
			p = next
			continue
		}
		if end-p < ind+2 || !allSpaces(q.s[p:p+ind]) {
			return nil
		}
		if i == 0 && (q.s[p+ind] != '-' || q.s[p+ind+1] != ' ') || i > 0 && (q.s[p+ind] != ' ' || q.s[p+ind+1] != ' ') {
			return nil
		}
		q.end = end
		k, v := q.blockPair(p + ind + 2)
		if k == nil {
			return nil
		}
		m.Content = append(m.Content, k, v)
		p = next
	}
	return m
}

// blockPair reads "key: value" of a block mapping line at pos.
func (q *quickParser) blockPair(pos int) (k, v *yaml.Node) {
	k, pos = q.flowKey(pos)
	if k == nil || pos+1 >= q.end || q.s[pos] != ':' || q.s[pos+1] != ' ' {
		return nil, nil
	}
	pos = q.skipSpaces(pos + 1)
	if pos == q.end {
		return nil, nil // null values are left to the parser
	}
	switch q.s[pos] {
	case '{', '[', '"':
		v, pos = q.flowValue(pos, 0)
	default:
		v, pos = q.plainScalar(pos, false)
	}
	if v == nil || pos != q.end {
		return nil, nil
	}
	return k, v
}

// flowValue reads a value of a flow collection at pos (a mapping, a list,
// a double-quoted or a plain scalar) and the spaces after it.
func (q *quickParser) flowValue(pos, depth int) (*yaml.Node, int) {
	if pos >= q.end || depth > 3 {
		return nil, 0
	}
	var n *yaml.Node
	switch q.s[pos] {
	case '{', '[':
		n, pos = q.flowCollection(pos, depth)
	case '"':
		n, pos = q.quoted(pos)
	default:
		n, pos = q.plainScalar(pos, true)
	}
	if n == nil {
		return nil, 0
	}
	return n, q.skipSpaces(pos)
}

// flowCollection reads "{k: v, ...}" or "[v, ...]" at pos.
func (q *quickParser) flowCollection(pos, depth int) (*yaml.Node, int) {
	s := q.s
	mapping := s[pos] == '{'
	kind, tag, end := yaml.SequenceNode, "!!seq", byte(']')
	if mapping {
		kind, tag, end = yaml.MappingNode, "!!map", '}'
	}
	n := q.a.node(kind, tag, yaml.FlowStyle, "")
	if depth == 0 {
		n.Content = q.a.children(2 * (bytes.Count(s[pos:q.end], []byte(",")) + 1))
	}
	pos = q.skipSpaces(pos + 1)
	for pos < q.end && s[pos] != end {
		if mapping {
			k, p := q.flowKey(pos)
			if k == nil || p+1 >= q.end || s[p] != ':' || s[p+1] != ' ' {
				return nil, 0
			}
			n.Content = append(n.Content, k)
			pos = q.skipSpaces(p + 1)
		}
		v, p := q.flowValue(pos, depth+1)
		if v == nil {
			return nil, 0
		}
		n.Content = append(n.Content, v)
		pos = p
		if pos < q.end && s[pos] == ',' {
			pos = q.skipSpaces(pos + 1)
			if pos < q.end && s[pos] == end {
				return nil, 0 // a trailing comma: left to the parser
			}
		} else if pos >= q.end || s[pos] != end {
			return nil, 0
		}
	}
	if pos >= q.end {
		return nil, 0
	}
	return n, pos + 1
}

// flowKey reads a key [A-Za-z_][A-Za-z0-9_-]* at pos; its tag is the one
// yaml.v3 resolves.
func (q *quickParser) flowKey(pos int) (*yaml.Node, int) {
	start := pos
	for ; pos < q.end; pos++ {
		c := q.s[pos]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || pos > start && (c >= '0' && c <= '9' || c == '-') {
			continue
		}
		break
	}
	if pos == start {
		return nil, 0
	}
	return q.resolved(start, pos), pos
}

// resolved returns the plain scalar s[i:j] with the tag yaml.v3 resolves.
func (q *quickParser) resolved(i, j int) *yaml.Node {
	n := q.a.node(yaml.ScalarNode, "", 0, q.value(i, j))
	n.Tag = n.ShortTag()
	return n
}

// value returns s[i:j] as a string of its own (a substring of the item's
// text would keep all of it alive in the sources), the common keys and
// values as constants.
func (q *quickParser) value(i, j int) string {
	switch v := q.s[i:j]; string(v) {
	case "name":
		return "name"
	case "type":
		return "type"
	case "url":
		return "url"
	case "http":
		return "http"
	case "exec":
		return "exec"
	default:
		return string(v)
	}
}

// quoted reads a double-quoted string of printable ASCII without escapes.
func (q *quickParser) quoted(pos int) (*yaml.Node, int) {
	for i := pos + 1; i < q.end; i++ {
		switch c := q.s[i]; {
		case c == '"':
			return q.a.node(yaml.ScalarNode, "!!str", yaml.DoubleQuotedStyle, q.value(pos+1, i)), i + 1
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
func (q *quickParser) plainScalar(pos int, flow bool) (*yaml.Node, int) {
	s, start := q.s, pos
	for ; pos < q.end; pos++ {
		c := s[pos]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' {
			continue
		}
		if pos > start && (c == '+' || c == '-' || c == '@' || !flow && c == ':' && pos+1 < q.end && s[pos+1] != ' ') {
			continue
		}
		break
	}
	if pos == start {
		return nil, 0
	}
	return q.resolved(start, pos), pos
}

// skipSpaces returns the index of the first byte at or after pos (before
// the line's end) that is not a space.
func (q *quickParser) skipSpaces(pos int) int {
	for pos < q.end && q.s[pos] == ' ' {
		pos++
	}
	return pos
}

// allSpaces reports whether s is spaces only.
func allSpaces(s []byte) bool {
	for _, c := range s {
		if c != ' ' {
			return false
		}
	}
	return true
}
