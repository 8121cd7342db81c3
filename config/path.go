package config

import (
	"strconv"
)

// path says where a value is, for problems: "sources[name=api].headers.A",
// "defaults.backoff.max", "sources[3].command[0]". It is a value built up
// key by key and made into a string only when a problem is reported (by
// String), so that the sources of a large config cost no string building.
type path struct {
	name  string    // with src: the source's name, when problems name it by name
	elems [2]string // keys (the first may be a prefix built beforehand), joined by "."
	src   int32     // 1 + the index of the source the path is in, or 0
	idx   int32     // 1 + a list index written last ("[3]"), or 0
	n     int       // elements of elems in use
}

// at returns the path s, already built; "" is the top level.
func at(s string) path {
	if s == "" {
		return path{}
	}
	return path{elems: [2]string{s}, n: 1}
}

// sourcePath is the path of sources[i], or sources[name=NAME] when name is
// not "".
func sourcePath(i int, name string) path {
	return path{src: int32(i + 1), name: name}
}

// key returns the path of key within p.
func (p path) key(key string) path {
	if key == "" {
		key = `""` // an empty key, named as YAML writes it
	}
	if p.idx != 0 || p.n == len(p.elems) {
		p = at(p.String())
	}
	p.elems[p.n] = key
	p.n++
	return p
}

// index returns the path of the i-th element of the list at p.
func (p path) index(i int) path {
	if p.idx != 0 {
		p = at(p.String())
	}
	p.idx = int32(i + 1)
	return p
}

// top reports whether p is the top level of the file.
func (p path) top() bool {
	return p.src == 0 && p.n == 0 && p.idx == 0
}

// String returns the path as problems show it.
func (p path) String() string {
	var b []byte
	if p.src != 0 {
		if p.name != "" {
			b = append(b, "sources[name="...)
			b = append(b, p.name...)
		} else {
			b = append(b, "sources["...)
			b = strconv.AppendInt(b, int64(p.src-1), 10)
		}
		b = append(b, ']')
	}
	for i := range p.n {
		if i > 0 || p.src != 0 {
			b = append(b, '.')
		}
		b = append(b, p.elems[i]...)
	}
	if p.idx != 0 {
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(p.idx-1), 10)
		b = append(b, ']')
	}
	return string(b)
}

// strict reports whether p is a key that the commands on the store use
// (see Options.ForStore): store, source_files, a source's name, type or
// schedule, and defaults.schedule.
func (p path) strict() bool {
	if p.src == 0 && p.n == 1 && p.elems[0] == "source_files" {
		return true // which files hold sources (source_files[i] too)
	}
	if p.idx != 0 {
		return false
	}
	switch {
	case p.src == 0 && p.n == 1:
		return p.elems[0] == "store"
	case p.src == 0 && p.n == 2:
		return p.elems[0] == "defaults" && p.elems[1] == "schedule"
	case p.src != 0 && p.n == 1:
		switch p.elems[0] {
		case "name", "type", "schedule":
			return true
		}
	}
	return false
}
