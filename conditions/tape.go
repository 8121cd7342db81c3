package conditions

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"slices"
	"strconv"
)

// A tape is a JSON document checked once and indexed without decoding:
// one node per value (and per object key), in document order, each with
// its bytes and the index of the node after its subtree. body.json is read
// through it (lazyjson.go), so that a poll decodes only the values its
// expressions read: the 10 KiB body of issue 23's benchmark costs a scan
// and one pooled slice, where encoding/json built ~1,700 Go values.
//
// The check accepts exactly what json.Unmarshal into an any accepts
// (FuzzTape compares them): RFC 8259 with any bytes >= 0x80 in strings,
// nesting to 10,000 levels, and no number beyond float64's range.
type tape struct {
	b     []byte
	nodes []node
	// big indexes the keys of objects of more than bigObject members,
	// made on their first lookup (by the object's node).
	big map[uint32]map[string]uint32
	// maxSize bounds the size of every value of the document, as CEL's
	// size() counts it: the most members of an object or an array, the
	// most bytes of a string (more than its characters).
	maxSize int
}

// node is one value of a tape.
type node struct {
	start, end uint32 // the value's bytes (a string's with its quotes)
	next       uint32 // the index of the node after this value's subtree
	kind       nodeKind
	plain      bool // a string without escapes, all ASCII: its bytes are its value
}

// nodeKind is the JSON type of a node.
type nodeKind uint8

// The kinds of node.
const (
	kindNull nodeKind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindObject
	kindArray
)

// maxNesting is encoding/json's limit of nesting.
const maxNesting = 10000

// errNotJSON is a document the tape does not accept.
var errNotJSON = errors.New("not JSON")

// reset makes t the tape of b, or returns errNotJSON.
func (t *tape) reset(b []byte) error {
	t.b, t.nodes, t.big, t.maxSize = b, t.nodes[:0], nil, 0
	if len(b) >= 1<<31 {
		return errNotJSON
	}
	p := &parser{b: b, nodes: t.nodes}
	i, ok := p.value(skipSpace(b, 0), 0)
	t.nodes, t.maxSize = p.nodes, p.maxSize
	if !ok || skipSpace(b, i) != len(b) {
		return errNotJSON
	}
	return nil
}

// parser checks and indexes one document into a tape. It holds the
// tape's nodes while it appends to them (a slice of its own: appending
// through the tape's pointer cost a third of the scan).
type parser struct {
	b       []byte
	nodes   []node
	maxSize int
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace. Its first test inlines: most values follow no space.
func skipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' {
		return i
	}
	return skipSpaces(b, i)
}

// spaces8 is eight spaces read as a little-endian word.
const spaces8 = 0x2020202020202020

// skipSpaces is skipSpace past a space: runs of spaces (indentation,
// padding) eight bytes at a time.
func skipSpaces(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ':
			if i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:]) == spaces8 {
				i += 8
				continue
			}
			i++
		case '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Masks of the word tricks in plainRun (Hacker's Delight's "has a byte
// less than n"): ones has 0x01 in every byte, highs 0x80.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainRun returns the index of the first byte from j that a string does
// not hold as it is ('"', '\\', a control byte or a byte >= 0x80), reading
// eight bytes at a time while eight remain, or the index where fewer
// remain. In each word the lowest flagged byte is the first such byte
// exactly (a borrow only flags bytes above it), so that a short string's
// closing quote is found in one step.
func plainRun(b []byte, j int) int {
	for j+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[j:])
		quote, slash := x^(ones*'"'), x^(ones*'\\')
		special := ((x - ones*0x20) | (quote-ones)&^quote | (slash-ones)&^slash | x) & highs
		if special != 0 {
			return j + bits.TrailingZeros64(special)/8
		}
		j += 8
	}
	return j
}

// add appends a node for b[start:end] and returns its index. It writes
// the node's fields in place: a node built whole and copied was written
// by narrow stores and read back by one wide load, which stalled the CPU
// (a third of the scan).
func (p *parser) add(k nodeKind, start, end int, plain bool) uint32 {
	n := len(p.nodes)
	if n == cap(p.nodes) {
		p.nodes = slices.Grow(p.nodes, 1)
	}
	p.nodes = p.nodes[:n+1]
	nd := &p.nodes[n]
	nd.start, nd.end, nd.next, nd.kind, nd.plain = uint32(start), uint32(end), uint32(n+1), k, plain
	return uint32(n)
}

// value parses the value at b[i:] (i past any space) at nesting depth,
// and returns the index after it.
func (p *parser) value(i, depth int) (int, bool) {
	b := p.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		if depth >= maxNesting {
			return i, false
		}
		return p.container(i, depth+1)
	case c == '"':
		return p.str(i)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(i)
	case c == 't':
		return p.literal(i, "true", kindTrue)
	case c == 'f':
		return p.literal(i, "false", kindFalse)
	case c == 'n':
		return p.literal(i, "null", kindNull)
	}
	return i, false
}

// literal parses true, false or null.
func (p *parser) literal(i int, word string, k nodeKind) (int, bool) {
	end := i + len(word)
	if end > len(p.b) || string(p.b[i:end]) != word {
		return i, false
	}
	p.add(k, i, end, false)
	return end, true
}

// container parses an object or an array, its members at depth.
func (p *parser) container(i, depth int) (int, bool) {
	b := p.b
	obj := b[i] == '{'
	closer, k := byte(']'), kindArray
	if obj {
		closer, k = '}', kindObject
	}
	n := p.add(k, i, i, false)
	j := skipSpace(b, i+1)
	members := 0
	if j < len(b) && b[j] == closer {
		j++
	} else {
		for {
			var ok bool
			members++
			if obj {
				if j >= len(b) || b[j] != '"' {
					return j, false
				}
				if j, ok = p.str(j); !ok {
					return j, false
				}
				if j = skipSpace(b, j); j >= len(b) || b[j] != ':' {
					return j, false
				}
				j = skipSpace(b, j+1)
			}
			if j, ok = p.value(j, depth); !ok {
				return j, false
			}
			if j = skipSpace(b, j); j >= len(b) {
				return j, false
			}
			if b[j] == closer {
				j++
				break
			}
			if b[j] != ',' {
				return j, false
			}
			j = skipSpace(b, j+1)
		}
	}
	p.nodes[n].end, p.nodes[n].next = uint32(j), uint32(len(p.nodes))
	p.maxSize = max(p.maxSize, members)
	return j, true
}

// str parses a string.
func (p *parser) str(i int) (int, bool) {
	b := p.b
	plain := true
	j := plainRun(b, i+1)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			p.add(kindString, i, j+1, plain)
			if n := j - i - 1; n > p.maxSize {
				p.maxSize = n
			}
			return j + 1, true
		case c < 0x20:
			return j, false
		case c == '\\':
			plain = false
			if j+1 >= len(b) {
				return j, false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex4(b[j+2:j+6]) {
					return j, false
				}
				j += 6
			default:
				return j, false
			}
			continue
		case c >= 0x80:
			plain = false
		}
		j++
	}
	return j, false
}

// isHex4 reports whether h is four hex digits.
func isHex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// number parses a number: encoding/json's grammar, and (as its Unmarshal
// into an any) none that float64 cannot hold.
func (p *parser) number(i int) (int, bool) {
	b := p.b
	j := i
	if b[j] == '-' {
		j++
	}
	start := j
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		j = digits(b, j)
	default:
		return j, false
	}
	long := j-start > 300
	if j < len(b) && b[j] == '.' {
		if k := digits(b, j+1); k > j+1 {
			j = k
		} else {
			return k, false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		long = true
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := digits(b, j)
		if k == j {
			return j, false
		}
		j = k
	}
	if long {
		if _, err := strconv.ParseFloat(string(b[i:j]), 64); err != nil {
			return j, false
		}
	}
	p.add(kindNumber, i, j, false)
	return j, true
}

// digits returns the index after the decimal digits at b[i:].
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
