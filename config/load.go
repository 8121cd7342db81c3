package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Built-in defaults, used when a key is absent.
const (
	DefaultStore           = "pacer.db" // in $STATE_DIRECTORY under systemd, see defaultStore
	DefaultConcurrency     = 16
	DefaultShutdownTimeout = 30 * time.Second
	DefaultAdminListen     = "127.0.0.1:9090"
	DefaultLogLevel        = "info"
	DefaultLogFormat       = "text"
	DefaultHistoryKeep     = 100
	DefaultSchedule        = "@every 1m"
	DefaultTimeout         = 10 * time.Second
	DefaultErrorAfter      = 10
	DefaultMethod          = "GET"
	DefaultMaxBody         = 10 << 20
	// MaxNameLen is the longest source or limit group name.
	MaxNameLen = 200
)

// StateDirectoryEnv is the variable in which systemd passes the
// directories of StateDirectory= (colon-separated when there are several).
const StateDirectoryEnv = "STATE_DIRECTORY"

// defaultStore is the store of a config without a store key: DefaultStore
// in the first directory of $STATE_DIRECTORY when systemd sets it (so that
// the shipped unit, whose file system is read-only but for that directory,
// needs no store key), else DefaultStore next to the config file (in dir).
func defaultStore(env func(string) (string, bool), dir string) string {
	if v, ok := env(StateDirectoryEnv); ok {
		if first, _, _ := strings.Cut(v, ":"); first != "" {
			return resolveIn(dir, filepath.Join(first, DefaultStore))
		}
	}
	return resolveIn(dir, DefaultStore)
}

// resolveIn makes p absolute against dir.
func resolveIn(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// DefaultBackoff is the built-in backoff policy.
func DefaultBackoff() Backoff {
	return Backoff{Initial: time.Second, Max: 15 * time.Minute, Multiplier: 2, Jitter: 0.1}
}

// DefaultBreaker is the built-in breaker policy.
func DefaultBreaker() Breaker {
	return Breaker{Failures: 5, Cooldown: time.Minute}
}

// Load reads, expands, defaults and validates the config file at path.
// env looks up environment variables (pass os.LookupEnv in production; nil
// means an empty environment). It is used for ${VAR} expansion, for PATH
// when resolving exec commands and for $STATE_DIRECTORY, where the default
// store is under systemd.
//
// On any problem Load returns a nil *Config and a Problems error listing
// every problem found, not just the first.
func Load(path string, env func(string) (string, bool)) (*Config, error) {
	return LoadWith(path, env, Options{})
}

// Options changes how LoadWith loads a config.
type Options struct {
	// ForStore loads the config for a command that only reads or steers the
	// store (status, history, reset, pause, resume, trigger): these need the
	// store, the sources' names, types and schedules, not what only the
	// polls use. A ${VAR} that is not set, or a ${file:PATH} that cannot be
	// read, in any other value, is then no problem: it expands to ""
	// (a placeholder no poll uses), a problem
	// with that value is dropped, and the Fingerprint of every source such
	// a value reaches (its own, or one in defaults) is "", which the
	// scheduler takes for "unknown", so nothing written from it makes a
	// daemon with the real environment see a changed configuration. store,
	// name, type and schedule stay strict. Nor are the exec programs and
	// directories checked (the caller's PATH may not be the daemon's), nor
	// the admin token file read if it cannot be.
	ForStore bool
	// Previous is the config in force, whose sources this load may reuse:
	// a source of the config file's list whose text, and everything it
	// inherits, is unchanged and which read nothing outside the file (no
	// ${VAR}, no file, no exec program) is taken as it was instead of being
	// parsed again, which makes a SIGHUP with one source changed cheap.
	// nil: every source is parsed.
	Previous *Config
}

// LoadWith is Load with options.
func LoadWith(path string, env func(string) (string, bool), opts Options) (*Config, error) {
	env, abs, data, err := configInput(path, env)
	if err != nil {
		return nil, err
	}
	if cfg := loadFast(path, abs, data, env, opts); cfg != nil {
		return cfg, nil
	}
	return loadTree(path, abs, data, env, opts)
}

// loadTree loads the config file whose text is data from the node tree of
// the whole file: the way every config can be loaded, and the one whose
// problems carry the lines and paths of the file.
func loadTree(path, abs string, data []byte, env func(string) (string, bool), opts Options) (*Config, error) {
	root, prob := parseYAML(path, data)
	if prob != nil && !blank(data) {
		return nil, Problems{*prob}
	}
	if root == nil || isNull(root) {
		// A file being written (a SIGHUP in the middle of an editor's save)
		// must not stop every source: nothing is not a config.
		return nil, Problems{{Path: path, Msg: "config is empty (no YAML content, only white space or comments)"}}
	}
	l := newLoader(path, abs, env, opts)
	cfg := l.config(root)
	if ps := l.finish(); len(ps) > 0 {
		return nil, ps
	}
	return l.result(cfg, abs), nil
}

// parserPanic starts the message of the problem that stands for a panic of
// the YAML parser: a bug to report, not the user's (tests and fuzz targets
// fail on it).
const parserPanic = "internal error: the YAML parser panicked"

// parseYAML decodes data into a node tree; a syntax error is one Problem,
// and so is a panic of the parser (see parserPanic): odd input must not
// bring the daemon down.
func parseYAML(file string, data []byte) (root *yaml.Node, prob *Problem) {
	defer func() {
		if r := recover(); r != nil {
			root, prob = nil, &Problem{Path: file, Msg: fmt.Sprintf("cannot parse YAML (%s: %v)", parserPanic, r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // no document: white space or comments only
		}
		return nil, yamlProblem(file, refineLine(data, err))
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Problem{Path: fmt.Sprintf("%s:%d", file, extra.Line), Msg: "more than one YAML document"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlProblem(file, refineLine(data, err))
	}
	return &doc, nil
}

// yamlProblem makes a yaml.v3 error a Problem, naming the line when the
// error does.
func yamlProblem(file string, err error) *Problem {
	msg := err.Error()
	// "yaml: line N: MSG", MSG on one line, names the line.
	if rest, ok := strings.CutPrefix(msg, "yaml: line "); ok {
		line, m, ok := strings.Cut(rest, ": ")
		if ok && line != "" && isDigits(line) && !strings.Contains(m, "\n") {
			return &Problem{Path: file + ":" + line, Msg: m}
		}
	}
	return &Problem{Path: file, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// MaxConfigSize is the largest config file Load reads.
const MaxConfigSize = 256 << 20

// readConfigFile reads the config file at abs: a regular file (not a
// device such as /dev/zero, a FIFO or a directory, which could be read
// forever or block) of at most MaxConfigSize bytes, checked on the open
// file and again while reading (it may grow meanwhile).
func readConfigFile(abs string) ([]byte, error) { return readYAMLFile(abs, "config file") }

// configInput is what LoadWith and PeekStore start from: env, or an empty
// environment when nil, and the config file at path, made absolute, and
// read. The error is the Problems LoadWith returns.
func configInput(path string, env func(string) (string, bool)) (func(string) (string, bool), string, []byte, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", nil, Problems{{Path: path, Msg: "cannot resolve path: " + err.Error()}}
	}
	data, err := readConfigFile(abs)
	if err != nil {
		return nil, "", nil, Problems{{Path: path, Msg: err.Error()}}
	}
	return env, abs, data, nil
}

// readYAMLFile is readConfigFile for a file that messages call what
// ("config file", "source file").
func readYAMLFile(abs, what string) ([]byte, error) {
	// Stat before opening: opening a FIFO blocks until a writer comes.
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", what, unwrapPath(err))
	}
	if err := checkConfigFile(fi, what); err != nil {
		return nil, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", what, unwrapPath(err))
	}
	defer f.Close()
	if fi, err = f.Stat(); err == nil { // the file opened, which may have been replaced
		err = checkConfigFile(fi, what)
	}
	if err != nil {
		return nil, err
	}
	// Sized from Stat (plus room to see it grew): no doubling from 512
	// bytes up to a 7 MiB file, nor for each of 1,000 source files.
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(f, MaxConfigSize+1))
	data := buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", what, unwrapPath(err))
	}
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("%s is larger than the limit of 256 MiB", what)
	}
	return data, nil
}

// checkConfigFile says why fi is not a file (called what) Load reads, or
// nil.
func checkConfigFile(fi fs.FileInfo, what string) error {
	switch {
	case fi.IsDir():
		return fmt.Errorf("cannot read %s: is a directory", what)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("cannot read %s: not a regular file (%s)", what, fileKind(fi.Mode()))
	case fi.Size() > MaxConfigSize:
		return fmt.Errorf("%s is larger than the limit of 256 MiB (%d bytes)", what, fi.Size())
	}
	return nil
}

// unwrapPath drops the *fs.PathError around err: the problem names the
// file already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fileKind names the type of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "type " + m.Type().String()
}

// blank reports whether data holds only white space and comments (a tab,
// which YAML refuses as indentation, included).
func blank(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}
