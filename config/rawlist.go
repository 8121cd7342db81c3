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
	start, ok := findSourcesKey(data)
	if !ok {
		return rawList{}, false
	}
	if start < 0 {
		return rawList{head: data}, true // no list: the sources are in source files, or none
	}
	items, end, ok := cutItems(data, start)
	if !ok {
		return rawList{}, false
	}
	rl.items = items
	rl.head = make([]byte, 0, len(data)-(end-start)+1)
	rl.head = append(rl.head, data[:start]...)
	if n := len(rl.head); n > 0 && rl.head[n-1] != '\n' {
		rl.head = append(rl.head, '\n')
	}
	rl.head = append(rl.head, data[end:]...)
	return rl, true
}

// nextLine returns the line of data at off (with its newline) and the
// offset of the next one.
func nextLine(data []byte, off int) (line []byte, next int) {
	next = len(data)
	if eol := bytes.IndexByte(data[off:], '\n'); eol >= 0 {
		next = off + eol + 1
	}
	return data[off:next], next
}

// findSourcesKey returns the offset of the line after the line "sources:"
// of data (-1 when there is none); ok is false when the sources list is not
// in a form cutSources reads (a directive first, or "sources:" with a value
// on its line).
func findSourcesKey(data []byte) (start int, ok bool) {
	for off := 0; off < len(data); {
		line, next := nextLine(data, off)
		if len(line) > 0 && line[0] == '%' {
			return -1, false // a directive: tag handles may reach the items
		}
		if isSourcesKey(line) {
			return next, true
		}
		if bytes.HasPrefix(line, []byte("sources")) {
			return -1, false // "sources: [...]", "sources: &a": the parser's
		}
		off = next
	}
	return -1, true
}

// cutItems returns the byte spans of the items of the block list whose
// lines start at start, and the end of the list: the next line at column
// 0, or the end of data. ok is false when the lines are not such a list.
func cutItems(data []byte, start int) (items [][2]int, end int, ok bool) {
	ind, item := -1, -1 // the items' indentation, the start of the current item
	for off := start; off < len(data); {
		line, next := nextLine(data, off)
		sp, c := indentOf(line)
		switch {
		case c == '\t':
			return nil, 0, false
		case c == 0 || c == '#': // blank or comment: part of the current item
		case ind < 0: // the first item
			if !isItemStart(line, sp) {
				return nil, 0, false // an empty or a flow list, or a mapping
			}
			ind, item = sp, off
			items = make([][2]int, 0, bytes.Count(data[off:], []byte("\n"))+1) // at most one per line
		case sp == 0 && (ind > 0 || !isItemStart(line, 0)): // the next top-level key
			return append(items, [2]int{item, off}), off, true
		case sp == ind && isItemStart(line, sp):
			items = append(items, [2]int{item, off})
			item = off
		case sp <= ind:
			return nil, 0, false
		}
		off = next
	}
	if item < 0 {
		return nil, 0, false
	}
	return append(items, [2]int{item, len(data)}), len(data), true
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
