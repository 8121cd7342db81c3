package config

import (
	"encoding/binary"
	"hash/maphash"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// fastCache is what a Load that cut its sources list from the raw text
// (see cutSources) keeps in its Config for the next Load (Options.Previous).
type fastCache struct {
	seed maphash.Seed // of every hash below; carried from load to load
	// context is the hash of what every source of the list depends on
	// besides its own text: the rest of the file (defaults, limits), the
	// path, Options.ForStore, the variables the defaults and limits looked
	// up; 0 when they read a file, and nothing can be reused.
	context uint64
	// hashes holds, for each of the first len(hashes) sources of
	// Config.Sources (the config file's list), its item's text hash, or 0
	// when the source read something outside the file and must be parsed
	// again.
	hashes []uint64
	// deps holds what the sources of hashes at these indexes read from the
	// environment and recorded as secrets (see sourceDeps); a source
	// without any has none.
	deps   map[int32]*sourceDeps
	reused int // sources taken from Options.Previous
}

// sourceDeps is what reading one source depended on besides its text and
// context: the environment variables it looked up (it is reused only while
// each has the value it had), and the secrets and masks it recorded (its
// reuse records them again, in the same order).
type sourceDeps struct {
	env     []envRead
	secrets []string
	masks   []maskCall
}

// envRead is one look-up in the environment.
type envRead struct {
	name, value string
	set         bool
}

// maskCall is one call of reporter.mask.
type maskCall struct {
	value string
	spans [][2]int
}

// sameEnv reports whether every variable d looked up has the value it had.
func (l *decoder) sameEnv(d *sourceDeps) bool {
	for _, e := range d.env {
		if v, ok := l.env(e.name); v != e.value || ok != e.set {
			return false
		}
	}
	return true
}

// replay records the secrets and masks of a reused source again.
func (l *decoder) replay(d *sourceDeps) {
	for _, s := range d.secrets {
		l.secret(s)
	}
	for _, m := range d.masks {
		l.mask(m.value, m.spans)
	}
}

// fastRun is the state of a Load that reads the sources list cut from the
// raw text.
type fastRun struct {
	data    []byte
	list    rawList
	seed    maphash.Seed
	context uint64
	prev    *Config          // Options.Previous when its context is this load's
	index   map[uint64]int32 // item hash -> index in prev.Sources
	failed  bool             // a problem: the caller loads the whole file the usual way
	hashes  []uint64
	deps    map[int32]*sourceDeps
	reused  int
}

// Reused returns how many of c's sources Load took unchanged from
// Options.Previous instead of parsing them (0 for a Config not built by
// Load with a previous one).
func (c *Config) Reused() int {
	if c == nil || c.fast == nil {
		return 0
	}
	return c.fast.reused
}

// loadFast loads the config file whose text is data with its sources list
// cut from the raw text (see rawList): it returns nil when the list is not
// in the form cutSources reads, or on any problem, and the caller then
// loads the whole file the usual way, which finds the same config or
// reports every problem with its line and path exactly as before.
func loadFast(file, abs string, data []byte, env func(string) (string, bool), opts Options) *Config {
	list, ok := cutSources(data)
	if !ok {
		return nil
	}
	root, prob := parseYAML(file, list.head)
	if prob != nil || root == nil || isNull(root) {
		return nil
	}
	f := &fastRun{data: data, list: list, seed: maphash.MakeSeed()}
	prev := opts.Previous
	if prev != nil && prev.fast != nil {
		f.seed = prev.fast.seed
	}
	f.context = contextHash(f.seed, abs, list.head, opts)
	if prev != nil && prev.fast != nil && prev.fast.context != 0 {
		f.prev = prev // if the context is the same (see fastSources)
	}
	l := newLoader(file, abs, env, opts)
	l.fast = f
	cfg := l.config(root)
	if f.failed || len(l.probs) > 0 {
		return nil
	}
	cfg = l.result(cfg, abs)
	cfg.fast = &fastCache{seed: f.seed, context: f.context, hashes: f.hashes, deps: f.deps, reused: f.reused}
	return cfg
}

// contextHash hashes what every source of the list depends on besides its
// text and the environment (whose use makes a source or the defaults
// impure, see fastSources); never 0.
func contextHash(seed maphash.Seed, abs string, head []byte, opts Options) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	_, _ = h.WriteString(filepath.Clean(abs))
	_ = h.WriteByte(0)
	if opts.ForStore {
		_ = h.WriteByte(1)
	}
	_, _ = h.Write(head)
	return h.Sum64() | 1
}

// withEnv adds the variables looked up (their names and values) to the
// context hash h; never 0.
func withEnv(seed maphash.Seed, h uint64, env []envRead) uint64 {
	if len(env) == 0 {
		return h
	}
	var m maphash.Hash
	m.SetSeed(seed)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], h)
	_, _ = m.Write(b[:])
	for _, e := range env {
		_, _ = m.WriteString(e.name)
		_ = m.WriteByte(0)
		if e.set {
			_ = m.WriteByte(1)
		}
		_, _ = m.WriteString(e.value)
		_ = m.WriteByte(0)
	}
	return m.Sum64() | 1
}

// fastSources reads the sources of the list cut from the raw text (l.fast),
// as sources does from a node tree, reusing from Options.Previous each
// source whose item text is unchanged (when noFiles: the defaults and
// limits read no file; env is what they read of the environment). Any problem sets l.fast.failed:
// the caller then loads the whole file the usual way, whose problems carry
// lines and paths.
func (l *loader) fastSources(b inherited, groups map[string]bool, noFiles bool, env []envRead) ([]*Source, map[string]int) {
	f := l.fast
	if len(l.probs) > 0 {
		f.failed = true
		return nil, nil
	}
	// The context: the head's text, and the values of the variables that
	// the defaults and limits looked up.
	f.context = withEnv(f.seed, f.context, env)
	if !noFiles || b.placeholder {
		f.context = 0
	}
	if f.context == 0 || f.prev != nil && f.prev.fast.context != f.context {
		f.prev = nil
	}
	if f.prev != nil {
		f.index = make(map[uint64]int32, len(f.prev.fast.hashes))
		for j, h := range f.prev.fast.hashes {
			if h != 0 {
				f.index[h] = int32(j)
			}
		}
	}
	n := len(f.list.items)
	f.hashes = make([]uint64, 0, n)
	out, ok := l.readList(make([]*Source, 0, n), b, groups)
	if !ok {
		f.failed = true
		return nil, nil
	}
	// same: every source has the name of the previous config's at its
	// index, whose index by name then serves unchanged.
	same := f.prev != nil && len(f.prev.Sources) == n && len(f.prev.idx.byName) == n
	for i := 0; same && i < n; i++ {
		same = f.prev.Sources[i].Name == out[i].Name
	}
	if same {
		return out, f.prev.idx.byName // never written once built
	}
	first := make(map[string]int, n)
	for i := range out {
		if _, dup := first[out[i].Name]; dup {
			f.failed = true
			return nil, nil
		}
		first[out[i].Name] = i
	}
	return out, first
}

// readList appends the sources of the list l.fast holds (the config
// file's, or a source file's) to out, recording their hashes and what they
// depend on. ok is false on a problem.
func (l *loader) readList(out []*Source, b inherited, groups map[string]bool) ([]*Source, bool) {
	f := l.fast
	p := f.startParse(l.file)
	defer p.stop()
	for i := range f.list.items {
		it, ok := p.item(i)
		if !ok {
			return nil, false
		}
		s, h, deps, ok := l.listItem(it, i, b, groups)
		if !ok {
			return nil, false
		}
		if _, taken := l.claimName(s.Name, i); taken {
			return nil, false
		}
		if deps != nil {
			if f.deps == nil {
				f.deps = map[int32]*sourceDeps{}
			}
			f.deps[int32(len(out))] = deps
		}
		out = append(out, s)
		f.hashes = append(f.hashes, h)
	}
	return out, true
}

// listItem returns the source of item it (index i of the list): the one of
// Options.Previous it reuses when what that one read of the environment is
// unchanged, else the one read from its node (parsed now if it was to be
// reused). h is the hash to keep for the next load (0: not reusable) and
// deps what the source depends on. ok is false on a problem.
func (l *loader) listItem(it parsedItem, i int, b inherited, groups map[string]bool) (s *Source, h uint64, deps *sourceDeps, ok bool) {
	f := l.fast
	if it.node == nil {
		deps = f.prev.fast.deps[it.prev]
		if deps == nil || l.sameEnv(deps) {
			if deps != nil {
				l.replay(deps)
			}
			f.reused++
			return f.prev.Sources[it.prev], it.hash, deps, true
		}
		sp := f.list.items[i]
		nodes, ok := parseItems(l.file, f.data[sp[0]:sp[1]], 1)
		if !ok {
			return nil, 0, nil, false
		}
		it.node = nodes[0]
	}
	src, pure, deps, ok := l.pureSource(it.node, i, b, groups)
	if !ok {
		return nil, 0, nil, false
	}
	if !pure || f.context == 0 {
		return l.arena.keep(&src), 0, nil, true
	}
	return l.arena.keep(&src), it.hash, deps, true
}

// pureSource reads the source of node n (index i) and reports whether the
// next Load may reuse it while its text is unchanged: it read no file and
// holds nothing the loader shares between sources (a client, credentials),
// and what it read of the environment and recorded as secrets is in deps
// (nil when nothing). ok is false on a problem.
func (l *loader) pureSource(n *yaml.Node, i int, b inherited, groups map[string]bool) (s Source, pure bool, deps *sourceDeps, ok bool) {
	files, holders := l.files, l.placeholders
	rec := &sourceDeps{}
	l.rec = rec
	s, ok = l.source(n, sourcePath(i, ""), b, groups)
	l.rec = nil
	if !ok || len(l.probs) > 0 {
		return Source{}, false, nil, false
	}
	pure = l.files == files && l.placeholders == holders &&
		s.Type == "http" && s.Client == nil && s.Auth == nil && !hasAnchor(n, 0)
	if len(rec.env) > 0 || len(rec.secrets) > 0 || len(rec.masks) > 0 {
		deps = rec
	}
	return s, pure, deps, true
}

// hasAnchor reports whether the node tree n holds an anchor or an alias
// (an alias's anchor may be in another item, changed while this item's
// text is not; an anchor's aliases need it parsed with them), or is nested
// too deeply to tell.
func hasAnchor(n *yaml.Node, depth int) bool {
	if n == nil {
		return false
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" || depth > 50 {
		return true
	}
	for _, c := range n.Content {
		if hasAnchor(c, depth+1) {
			return true
		}
	}
	return false
}

// fastSourceFiles is readSourceFiles for a load from cut lists: each source
// file's list is cut and read as the config file's is, its unchanged
// sources reused; a file whose list cannot be cut is read from its node
// tree (none of its sources reused). Any problem sets l.fast.failed.
func (l *loader) fastSourceFiles(cfg *Config, b inherited, groups map[string]bool) {
	f := l.fast
	all := cfg.Sources
	for i, abs := range l.srcFiles.abs {
		l.srcFiles.cur = i + 1
		data, err := readYAMLFile(abs, "source file")
		if err != nil {
			f.failed = true
			return
		}
		var ok bool
		if list, cut := cutSources(data); cut && len(list.items) > 0 && onlySourcesKey(list.head) {
			f.data, f.list = data, list
			all, ok = l.readList(all, b, groups)
		} else {
			all, ok = l.treeSourceFile(all, abs, l.srcFiles.rel[i], b, groups)
		}
		if !ok || len(l.probs) > 0 {
			f.failed = true
			return
		}
	}
	l.srcFiles.cur = 0
	byName := make(map[string]int, len(all))
	for i := range all {
		if _, dup := byName[all[i].Name]; dup {
			f.failed = true
			return
		}
		byName[all[i].Name] = i
	}
	cfg.Sources, cfg.idx.byName = all, byName
}

// treeSourceFile appends the sources of the source file abs read from its
// node tree, none reusable.
func (l *loader) treeSourceFile(all []*Source, abs, rel string, b inherited, groups map[string]bool) ([]*Source, bool) {
	n := l.sourceFile(abs, rel)
	if n == nil || len(l.probs) > 0 {
		return all, len(l.probs) == 0
	}
	before := len(all)
	all, _ = l.sources(all, n, b, groups)
	for range all[before:] {
		l.fast.hashes = append(l.fast.hashes, 0)
	}
	return all, len(l.probs) == 0
}

// onlySourcesKey reports whether head (a source file without its list's
// items) is the key "sources" and nothing else.
func onlySourcesKey(head []byte) bool {
	root, prob := parseYAML("", head)
	if prob != nil {
		return false
	}
	d := deref(root)
	return d != nil && d.Kind == yaml.MappingNode && len(d.Content) == 2 &&
		d.Content[0].Kind == yaml.ScalarNode && d.Content[0].Value == "sources" && d.Content[0].ShortTag() == "!!str" && isNull(d.Content[1])
}
