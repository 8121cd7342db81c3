package config

import "bytes"

// rawList is the block-style sources list of a config file, cut out of its
// text (see cutSources): the loader then parses the rest of the file (the
// head, small) as one document and the list's items in batches, each
// batch's node tree garbage once its sources are read, instead of building
// the node tree of the whole file (yaml.v3 spent 0.6 s and ~200 MiB on it
// at 100,000 sources, issue 15).
type rawList struct {
	head  []byte   // the file without the list's items: "sources:" is left with a null value
	items [][2]int // the byte span of each item in the file's data, in order
}

// cutSources finds the sources list of data when it is written in the
// common block style (or finds none: a file without a line "sources:" is
// all head, without items): a line "sources:" at column 0 (optionally followed
// by a comment), then items "- ..." at one indentation, each followed by
// its more indented lines, up to the next line at column 0. Anything else
// (a flow list, tabs in the indentation, a directive, a line indented less
// than the items) yields ok == false and the caller parses the whole file
// as before. What this cut accepts, a YAML parser reads as the same list:
// each item's lines hold all of its text. (Anchors and aliases across
// items or between the list and the rest fail the separate parses, which
// the caller takes for a reason to parse the whole file.)
func cutSources(data []byte) (rl rawList, ok bool) {
	start, end, ind := -1, -1, -1 // the list's lines [start, end), its items' indentation
	item := -1                    // the start of the current item
	for off := 0; off < len(data); {
		eol := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if eol >= 0 {
			next = off + eol + 1
		}
		line := data[off:next]
		switch {
		case start < 0:
			if len(line) > 0 && line[0] == '%' {
				return rawList{}, false // a directive: tag handles may reach the items
			}
			if isSourcesKey(line) {
				start = next
			} else if bytes.HasPrefix(line, []byte("sources")) {
				return rawList{}, false // "sources: [...]", "sources: &a": the parser's
			}
		default:
			sp, c := indentOf(line)
			switch {
			case c == '\t':
				return rawList{}, false
			case c == 0 || c == '#': // blank or comment: part of the current item
			case ind < 0: // the first item
				if !isItemStart(line, sp) {
					return rawList{}, false // an empty or a flow list, or a mapping
				}
				ind, item = sp, off
				rl.items = make([][2]int, 0, bytes.Count(data[off:], []byte("\n"))+1) // at most one per line
			case sp == 0 && (ind > 0 || !isItemStart(line, 0)): // the next top-level key
				end = off
			case sp == ind && isItemStart(line, sp):
				rl.items = append(rl.items, [2]int{item, off})
				item = off
			case sp <= ind:
				return rawList{}, false
			}
		}
		if end >= 0 {
			break
		}
		off = next
	}
	if start < 0 {
		return rawList{head: data}, true // no list: the sources are in source files, or none
	}
	if item < 0 {
		return rawList{}, false
	}
	if end < 0 {
		end = len(data)
	}
	rl.items = append(rl.items, [2]int{item, end})
	rl.head = make([]byte, 0, len(data)-(end-start)+1)
	rl.head = append(rl.head, data[:start]...)
	if n := len(rl.head); n > 0 && rl.head[n-1] != '\n' {
		rl.head = append(rl.head, '\n')
	}
	rl.head = append(rl.head, data[end:]...)
	return rl, true
}

// isSourcesKey reports whether line is "sources:" at column 0, with
// nothing after it but white space and a comment.
func isSourcesKey(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("sources:"))
	if !ok {
		return false
	}
	_, c := indentOf(rest)
	return c == 0 || (c == '#' && len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t'))
}

// isItemStart reports whether line has a sequence entry ("-" followed by a
// space or the end of the line) at column sp.
func isItemStart(line []byte, sp int) bool {
	if sp >= len(line) || line[sp] != '-' {
		return false
	}
	if sp+1 == len(line) {
		return true
	}
	switch line[sp+1] {
	case ' ', '\n', '\r':
		return true
	}
	return false
}

// indentOf returns the number of leading spaces of line and the byte after
// them: 0 for a blank line (white space only, "\r" included), '\t' when the
// indentation holds a tab.
func indentOf(line []byte) (sp int, c byte) {
	for sp < len(line) && line[sp] == ' ' {
		sp++
	}
	if len(bytes.TrimRight(line[sp:], "\r\n")) == 0 {
		return sp, 0
	}
	return sp, line[sp]
}
