package config

import (
	"go.yaml.in/yaml/v3"
)

// deref follows aliases and unwraps documents.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && i < 100; i++ {
		switch n.Kind {
		case yaml.AliasNode:
			n = n.Alias
		case yaml.DocumentNode:
			if len(n.Content) == 0 {
				return nil
			}
			n = n.Content[0]
		default:
			return n
		}
	}
	return nil
}

// isNull reports whether n is absent or a YAML null.
func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names the kind of n for problems ("a mapping", "a number").
func describe(n *yaml.Node) string {
	n = deref(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return "a string"
	}
	return "an unsupported YAML node"
}

// pair is one key of a mapping and its value node.
type pair struct {
	key string
	val *yaml.Node
}

// pairs returns the entries of a mapping node in file order, resolving
// aliases and merge keys ("<<"). A null node is an empty mapping. Anything
// else is a problem and yields ok == false.
func (l *decoder) pairs(n *yaml.Node, p path) (ps []pair, ok bool) {
	if isNull(n) {
		return nil, true
	}
	var c pairList
	d := deref(n)
	if d != nil && d.Kind == yaml.MappingNode {
		c.ps = make([]pair, 0, len(d.Content)/2)
	}
	ok = l.collectPairs(d, p, &c, true, 0)
	return c.ps, ok
}

// pairList collects the pairs of a mapping and its merged mappings.
type pairList struct {
	ps   []pair
	seen map[string]bool     // the keys of ps, once there are many (else ps is scanned)
	done map[mergeVisit]bool // mappings merged so far; nil until a merge key is met
}

// maxScan is the number of keys up to which pairList scans ps for a key.
const maxScan = 16

// has reports whether key was collected.
func (c *pairList) has(key string) bool {
	if c.seen != nil {
		return c.seen[key]
	}
	for i := range c.ps {
		if c.ps[i].key == key {
			return true
		}
	}
	return false
}

// add collects a pair, indexing the keys once there are more than maxScan.
func (c *pairList) add(key string, val *yaml.Node) {
	c.ps = append(c.ps, pair{key: key, val: val})
	switch {
	case c.seen != nil:
		c.seen[key] = true
	case len(c.ps) > maxScan:
		c.seen = make(map[string]bool, 2*len(c.ps))
		for _, p := range c.ps {
			c.seen[p.key] = true
		}
	}
}

// mergeVisit is a mapping merged at a depth. Merging the same mapping again
// at the same depth adds no key (its keys are all seen by then), so each is
// merged once: aliases let a small file merge one mapping exponentially
// many times ("billion laughs").
type mergeVisit struct {
	n     *yaml.Node
	depth int
}

// collectPairs adds the pairs of mapping n to c, then those of the
// mappings it merges (whose keys do not override). explicit is true for
// the mapping itself, whose duplicate keys are problems.
func (l *decoder) collectPairs(n *yaml.Node, p path, c *pairList, explicit bool, depth int) bool {
	where := p
	if where.top() {
		where = at(l.file) // the top level: the problem is the file's
	}
	if n == nil || n.Kind != yaml.MappingNode {
		l.addf(where, "expected a mapping, got %s", describe(n))
		return false
	}
	if depth > 20 {
		l.addf(where, "merge keys nested too deeply")
		return false
	}
	// Only merges recurse, at depth > 0: the mapping at depth 0 is never
	// visited again.
	if depth > 0 {
		if c.done[mergeVisit{n, depth}] {
			return true
		}
		c.done[mergeVisit{n, depth}] = true
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			l.addf(where, "line %d: keys must be strings", n.Content[i].Line)
			continue
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if c.has(k.Value) {
			if explicit {
				l.addf(p.key(k.Value), "duplicate key")
			}
			continue
		}
		c.add(k.Value, v)
	}
	if len(merges) > 0 && c.done == nil {
		c.done = map[mergeVisit]bool{}
	}
	for _, m := range merges {
		m = deref(m)
		if m != nil && m.Kind == yaml.SequenceNode {
			for _, e := range m.Content {
				l.collectPairs(deref(e), p, c, false, depth+1)
			}
			continue
		}
		l.collectPairs(m, p, c, false, depth+1)
	}
	return true
}

// items returns the elements of a sequence node (null: none).
func (l *decoder) items(n *yaml.Node, p path) ([]*yaml.Node, bool) {
	if isNull(n) {
		return nil, true
	}
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		l.addf(p, "expected a list, got %s", describe(n))
		return nil, false
	}
	return n.Content, true
}
