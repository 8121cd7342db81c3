package config

import (
	"path/filepath"

	"github.com/pacer-dev/pacer/conditions"
)

// The loader of one Load is built in layers, each owning its own state and
// calling only itself and the layers below it (each embeds the one below,
// so a method reaches what is beneath it by the receiver l, and the
// compiler refuses a call upwards):
//
//	loader        the top level: sections, limits, source_files, the cut list (fastload.go)
//	sourceReader  defaults and sources: their names, types, common and typed keys
//	blockReader   the nested blocks of defaults and sources: client/tls, auth, deliver, results
//	valueReader   typed values: URLs, headers, status lists, commands and directories (host look-ups cached)
//	decoder       YAML values: scalars, mappings, lists, ${VAR} and ${file:PATH} expansion
//	reporter      problems, secrets and masks, and where each problem is (source files)

// reporter collects what one Load found: its problems (formatted and
// redacted at the end, by finish), the secrets and masked values read, and
// where the source being read is (the config file or a source file).
type reporter struct {
	file     string // config path as given, for messages
	quiet    bool   // drop problems and secrets (used for a pre-pass)
	probs    []pendingProblem
	secrets  []string
	secretOK map[string]bool
	masks    map[string]int // value -> index in maskList
	maskList []masked
	// lenient holds the paths of the values that hold a placeholder
	// (Options.ForStore, see decoder.placeholder), whose problems finish
	// drops.
	lenient  map[string]bool
	srcFiles sourceFiles // source_files (source_files.go)
	rec      *sourceDeps // when set, what the source being read depends on is recorded in it
}

// decoder reads YAML values: scalars of each kind, mappings (merge keys
// included) and lists, expanding ${VAR} and ${file:PATH} and recording
// what it expanded as secrets.
type decoder struct {
	*reporter
	dir string // absolute directory of the config file
	env func(string) (string, bool)
	// forStore is Options.ForStore; placeholders counts the unset ${VAR}s
	// expanded to "" so far.
	forStore     bool
	placeholders int
	fileVals     map[string]fileValue // ${file:PATH} by resolved path (expand_file.go)
	// reads counts what the loader read outside the config's text: the
	// environment, ${file:PATH} files (a source that read nothing is
	// reused by the next Load, see fastRun).
	reads int
	files int // ${file:PATH} expansions (a source that made one is never reused)
}

// valueReader reads the typed values of sources and blocks (URLs, headers,
// status lists, commands, directories), caching what it asked the host.
type valueReader struct {
	*decoder
	looked  map[string]lookResult // exec.LookPath cache
	checked map[string]string     // checkExecutable cache
	dirs    map[string]dirResult  // os.Stat cache for dir
}

// blockReader reads the blocks that defaults and sources share: the HTTP
// client settings (tls, proxy_url, ...), auth, deliver and the results
// settings, and completes a source with them.
type blockReader struct {
	*valueReader
}

// sourceReader reads defaults and sources: each source's name, type and
// keys, on top of what it inherits.
type sourceReader struct {
	*blockReader
	schedules map[string]parsedSchedule // valid schedules by their text (they are immutable)
	fp        fingerprinter
	arena     sourceArena // where the sources read are kept
	// exprs compiles conditions (made on first use); prevExprs is
	// Options.Previous's, whose expressions it reuses.
	exprs, prevExprs *conditions.Compiler
}

// loader holds the state of one Load call: the top level of the config,
// and the cut sources list when the load reads one.
type loader struct {
	*sourceReader
	fast *fastRun // the sources list cut from the raw text, or nil (fastload.go)
}

// parsedSchedule is a schedule parsed by common, cached by its text.
type parsedSchedule struct {
	spec  string
	sched Schedule
}

// newLoader returns the loader of one Load of the config file at abs
// (path as given, for messages). Every lookup in env is counted in reads
// (see pureSource).
func newLoader(path, abs string, env func(string) (string, bool), opts Options) *loader {
	rep := &reporter{file: path, secretOK: map[string]bool{}}
	dec := &decoder{reporter: rep, dir: filepath.Dir(abs), forStore: opts.ForStore}
	dec.env = func(name string) (string, bool) {
		dec.reads++
		v, ok := env(name)
		if rep.rec != nil {
			rep.rec.env = append(rep.rec.env, envRead{name: name, value: v, set: ok})
		}
		return v, ok
	}
	vals := &valueReader{decoder: dec, looked: map[string]lookResult{}, checked: map[string]string{}, dirs: map[string]dirResult{}}
	src := &sourceReader{blockReader: &blockReader{valueReader: vals}, schedules: map[string]parsedSchedule{}}
	if opts.Previous != nil {
		src.prevExprs = opts.Previous.exprs // exprs is made on first use
	}
	return &loader{sourceReader: src}
}

// result completes the Config of a Load without problems.
func (l *loader) result(cfg *Config, abs string) *Config {
	cfg.Path = abs
	cfg.Secrets = l.secrets
	cfg.SourceFiles, cfg.Notes = l.srcFiles.rel, l.srcFiles.notes
	cfg.masks = l.maskList
	if l.exprs == nil && l.prevExprs != nil {
		l.exprs = conditions.NewCompiler(l.prevExprs)
	}
	l.exprs.Seal(func(yield func(*conditions.Set) bool) {
		for _, s := range cfg.Sources {
			if s.Checks != nil && !yield(s.Checks) {
				return
			}
		}
	})
	cfg.exprs = l.exprs
	return cfg
}
