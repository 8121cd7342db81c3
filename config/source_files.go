package config

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// MaxSourceFiles is the most files the source_files patterns may match
// together. Each file is bounded like the config file (MaxConfigSize).
const MaxSourceFiles = 10000

// sourceFiles is the state of source_files during one Load: the files
// the patterns matched, the file being read and where each source name
// was first seen (across the config file and every source file).
type sourceFiles struct {
	abs   []string // matched files, sorted, absolute
	rel   []string // the same, relative to the config's directory when inside it
	notes []string // remarks that are not problems (Config.Notes)
	cur   int      // 1 + the index of the source file being read, or 0
	// seen maps a source name to where it was first seen; nil unless
	// there are source files (a single file needs no such map).
	seen map[string]origin
}

// origin is where a source is: the index of its source file + 1 (0 for
// the config file) and its index in that file's sources list.
type origin struct{ file, idx int32 }

// where returns the path of a problem at p: in a source file, prefixed
// with that file's name ("sources.d/a.yaml: sources[name=x].url").
func (l *reporter) where(p path) string {
	s := p.String()
	if l.srcFiles.cur == 0 {
		return s
	}
	f := l.srcFiles.rel[l.srcFiles.cur-1]
	if s == "" {
		return f
	}
	return f + ": " + s
}

// describeOrigin names where o is, for a duplicate name.
func (l *reporter) describeOrigin(o origin) string {
	s := "sources[" + strconv.Itoa(int(o.idx)) + "]"
	if o.file == 0 {
		return s + " of the config file"
	}
	return s + " of " + l.srcFiles.rel[o.file-1]
}

// claimName records that the source at index i of the file being read is
// called name; if a source in another file has that name already, it
// returns where that one is.
func (l *reporter) claimName(name string, i int) (other string, taken bool) {
	if l.srcFiles.seen == nil || name == "" {
		return "", false
	}
	if o, ok := l.srcFiles.seen[name]; ok {
		return l.describeOrigin(o), true
	}
	l.srcFiles.seen[name] = origin{file: int32(l.srcFiles.cur), idx: int32(i)}
	return "", false
}

// sourceFilePatterns reads the source_files key: a list of glob patterns,
// relative to the config file's directory. The files they match are
// sorted (a stable order whatever the file system's); a pattern that
// matches nothing is no problem (a directory a generator has not filled
// yet) but a note.
func (l *loader) sourceFilePatterns(n *yaml.Node) {
	kp := at("source_files")
	items, _ := l.items(n, kp)
	matched := map[string]bool{}
	var files []string
	for i, it := range items {
		ip := kp.index(i)
		v, ok := l.scalar(it, ip, "a glob pattern")
		if !ok {
			continue
		}
		if v == "" {
			l.addf(ip, "must not be empty")
			continue
		}
		m, err := filepath.Glob(l.resolve(v))
		if err != nil {
			l.addf(ip, "invalid pattern %q: %v", v, err)
			continue
		}
		if len(m) == 0 {
			l.srcFiles.notes = append(l.srcFiles.notes, fmt.Sprintf("%s: pattern %q matches no file", ip, v))
		}
		for _, f := range m {
			if !matched[f] {
				matched[f] = true
				files = append(files, f)
			}
		}
	}
	if len(files) > MaxSourceFiles {
		l.addf(kp, "the patterns match %d files, more than the limit of %d", len(files), MaxSourceFiles)
		return
	}
	sort.Strings(files)
	l.srcFiles.abs = files
	l.srcFiles.rel = make([]string, len(files))
	for i, f := range files {
		l.srcFiles.rel[i] = f
		// Named relative to the config's directory when inside it.
		if r, err := filepath.Rel(l.dir, f); err == nil && filepath.IsLocal(r) {
			l.srcFiles.rel[i] = r
		}
	}
	if len(files) > 0 {
		l.srcFiles.seen = map[string]origin{}
	}
}

// readSourceFiles reads the sources of every source file after those of
// the config file, into cfg.Sources and its index. Every file is parsed
// first, so that the sources, the index and the names seen are allocated
// once at their size (not grown 1,000 times for 100,000 sources over
// 1,000 files); finish then orders the problems file by file.
func (l *loader) readSourceFiles(cfg *Config, b inherited, groups map[string]bool) {
	if len(l.srcFiles.abs) == 0 {
		return
	}
	if l.fast != nil {
		l.fastSourceFiles(cfg, b, groups)
		return
	}
	lists := make([]*yaml.Node, len(l.srcFiles.abs))
	items := 0
	for i := range l.srcFiles.abs {
		l.srcFiles.cur = i + 1
		lists[i] = l.sourceFile(l.srcFiles.abs[i], l.srcFiles.rel[i])
		if d := deref(lists[i]); d != nil && d.Kind == yaml.SequenceNode {
			items += len(d.Content)
		}
	}
	seen := make(map[string]origin, len(l.srcFiles.seen)+items)
	for name, o := range l.srcFiles.seen {
		seen[name] = o
	}
	l.srcFiles.seen = seen
	all := make([]*Source, len(cfg.Sources), len(cfg.Sources)+items)
	copy(all, cfg.Sources)
	for i, n := range lists {
		if n != nil {
			l.srcFiles.cur = i + 1
			all, _ = l.sources(all, n, b, groups)
		}
	}
	l.srcFiles.cur = 0
	byName := make(map[string]int, len(all))
	for i := range all {
		if _, dup := byName[all[i].Name]; !dup { // a duplicate fails Load
			byName[all[i].Name] = i
		}
	}
	cfg.Sources, cfg.idx.byName = all, byName
}

// byFile orders the problems by the file they are in, the config file
// first, keeping their order within each file.
func (l *reporter) byFile() {
	if len(l.srcFiles.abs) > 0 {
		sort.SliceStable(l.probs, func(i, j int) bool { return l.probs[i].file < l.probs[j].file })
	}
}

// sourceFile reads and parses the source file abs (rel for messages) and
// returns its sources list, or nil after reporting why there is none.
// The file holds a mapping with a sources key and nothing else; an empty
// file is a problem, as an empty config is (an editor's save in progress
// must not remove a team's sources): write "sources: []" for none.
func (l *loader) sourceFile(abs, rel string) *yaml.Node {
	data, err := readYAMLFile(abs, "source file")
	if err != nil {
		l.addf(path{}, "%v", err)
		return nil
	}
	root, prob := parseYAML(rel, data)
	if prob != nil && !blank(data) {
		// prob.Path is FILE:LINE already: not prefixed again.
		l.probs = append(l.probs, pendingProblem{file: l.srcFiles.cur, path: prob.Path, format: "%s", args: []any{prob.Msg}})
		return nil
	}
	if root == nil || isNull(root) {
		l.addf(path{}, "source file is empty (no YAML content, only white space or comments; write \"sources: []\" for none)")
		return nil
	}
	if deref(root).Kind != yaml.MappingNode {
		l.addf(path{}, "expected a mapping with a sources list at the top level, got %s", describe(root))
		return nil
	}
	ps, _ := l.pairs(root, path{})
	var list *yaml.Node
	for _, p := range ps {
		if p.key == "sources" {
			list = p.val
			continue
		}
		l.addf(path{}.key(p.key), "unknown key (a source file holds only a sources list)")
	}
	return list
}
