package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Built-in defaults, used when a key is absent.
const (
	DefaultStore           = "pacer.db"
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

// DefaultBackoff is the built-in backoff policy.
func DefaultBackoff() Backoff {
	return Backoff{Initial: time.Second, Max: 15 * time.Minute, Multiplier: 2, Jitter: 0.1}
}

// DefaultBreaker is the built-in breaker policy.
func DefaultBreaker() Breaker {
	return Breaker{Failures: 5, Cooldown: time.Minute}
}

// isHTTPKey reports whether key is a source key for type http only.
func isHTTPKey(key string) bool {
	switch key {
	case "url", "method", "headers", "body", "expect_status", "max_body":
		return true
	}
	return false
}

// isExecKey reports whether key is a source key for type exec only.
func isExecKey(key string) bool {
	switch key {
	case "command", "env", "dir":
		return true
	}
	return false
}

// Load reads, expands, defaults and validates the config file at path.
// env looks up environment variables (pass os.LookupEnv in production; nil
// means an empty environment). It is used for ${VAR} expansion and for PATH
// when resolving exec commands.
//
// On any problem Load returns a nil *Config and a Problems error listing
// every problem found, not just the first.
func Load(path string, env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, Problems{{Path: path, Msg: "cannot resolve path: " + err.Error()}}
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, Problems{{Path: path, Msg: "cannot read config file: " + err.Error()}}
	}
	root, prob := parseYAML(path, data)
	if prob != nil {
		return nil, Problems{*prob}
	}
	l := &loader{
		file:      path,
		dir:       filepath.Dir(abs),
		env:       env,
		secretOK:  map[string]bool{},
		looked:    map[string]lookResult{},
		checked:   map[string]string{},
		dirs:      map[string]dirResult{},
		schedules: map[string]parsedSchedule{},
		fp:        fpEncoder{memo: true},
	}
	cfg := l.config(root)
	cfg.Path = abs
	if ps := l.finish(); len(ps) > 0 {
		return nil, ps
	}
	cfg.Secrets = l.secrets
	return cfg, nil
}

// parseYAML decodes data into a node tree; a syntax error is one Problem.
func parseYAML(file string, data []byte) (root *yaml.Node, prob *Problem) {
	defer func() {
		if r := recover(); r != nil {
			root, prob = nil, &Problem{Path: file, Msg: fmt.Sprintf("cannot parse YAML: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty file
		}
		return nil, yamlProblem(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Problem{Path: fmt.Sprintf("%s:%d", file, extra.Line), Msg: "more than one YAML document"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlProblem(file, err)
	}
	return &doc, nil
}

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

// pendingProblem is formatted at the end, once every secret is known, so
// that string arguments can be redacted before they are quoted.
type pendingProblem struct {
	path   string
	format string
	args   []any
}

type lookResult struct {
	path      string // "" when not found
	emptyPATH bool
}

// dirResult is what os.Stat said about a directory.
type dirResult struct {
	missing, notDir bool
}

// parsedSchedule is a schedule parsed by common, cached by its text.
type parsedSchedule struct {
	spec  string
	sched Schedule
}

// loader holds the state of one Load call.
type loader struct {
	file      string // config path as given, for messages
	dir       string // absolute directory of the config file
	env       func(string) (string, bool)
	quiet     bool // drop problems and secrets (used for a pre-pass)
	probs     []pendingProblem
	secrets   []string
	secretOK  map[string]bool
	looked    map[string]lookResult     // exec.LookPath cache
	checked   map[string]string         // checkExecutable cache
	dirs      map[string]dirResult      // os.Stat cache for dir
	schedules map[string]parsedSchedule // valid schedules by their text (they are immutable)
	fp        fpEncoder
	fpBuf     []byte
}

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

// addf records a problem. String and error arguments are redacted before
// formatting.
func (l *loader) addf(p path, format string, args ...any) {
	if l.quiet {
		return
	}
	l.probs = append(l.probs, pendingProblem{path: p.String(), format: format, args: args})
}

// secret records s as a secret.
func (l *loader) secret(s string) {
	if l.quiet || s == "" || l.secretOK[s] {
		return
	}
	l.secretOK[s] = true
	l.secrets = append(l.secrets, s)
}

// containsSecret reports whether s contains a secret recorded so far.
func (l *loader) containsSecret(s string) bool {
	for _, x := range l.secrets {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// finish formats, redacts and de-duplicates the problems.
func (l *loader) finish() Problems {
	if len(l.probs) == 0 {
		return nil
	}
	r := NewRedactor(l.secrets...)
	seen := map[Problem]bool{}
	var out Problems
	for _, p := range l.probs {
		args := make([]any, len(p.args))
		for i, a := range p.args {
			switch v := a.(type) {
			case string:
				args[i] = r.Redact(v)
			case error:
				args[i] = r.Redact(v.Error())
			default:
				args[i] = a
			}
		}
		pr := Problem{Path: r.Redact(p.path), Msg: r.Redact(fmt.Sprintf(p.format, args...))}
		if !seen[pr] {
			seen[pr] = true
			out = append(out, pr)
		}
	}
	return out
}

// ---- YAML node helpers ----

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

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

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

type pair struct {
	key string
	val *yaml.Node
}

// pairs returns the entries of a mapping node in file order, resolving
// aliases and merge keys ("<<"). A null node is an empty mapping. Anything
// else is a problem and yields ok == false.
func (l *loader) pairs(n *yaml.Node, p path) (ps []pair, ok bool) {
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

func (l *loader) collectPairs(n *yaml.Node, p path, c *pairList, explicit bool, depth int) bool {
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
func (l *loader) items(n *yaml.Node, p path) ([]*yaml.Node, bool) {
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

// expand replaces ${VAR} by its value from env and $$ by $. Substituted
// non-empty values are recorded as secrets.
func (l *loader) expand(s string, p path) (string, bool) {
	if !strings.Contains(s, "$") {
		return s, true
	}
	var b strings.Builder
	ok := true
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c != '$':
			b.WriteByte(c)
			i++
		case i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i += 2
		case i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				l.addf(p, "unterminated ${ (write $$ for a literal $)")
				return b.String(), false
			}
			name := s[i+2 : i+2+end]
			i += end + 3
			if !isVarName(name) {
				l.addf(p, "invalid environment variable name %q in ${...} (write $$ for a literal $)", name)
				ok = false
				continue
			}
			v, set := l.env(name)
			if !set {
				l.addf(p, "environment variable %s is not set", name)
				ok = false
				continue
			}
			l.secret(v)
			b.WriteString(v)
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), ok
}

// scalar returns the expanded value of a non-null scalar; want describes the
// expected value for messages ("an integer").
func (l *loader) scalar(n *yaml.Node, p path, want string) (string, bool) {
	d := deref(n)
	if d == nil || d.Kind != yaml.ScalarNode || d.ShortTag() == "!!null" {
		l.addf(p, "expected %s, got %s", want, describe(n))
		return "", false
	}
	return l.expand(d.Value, p)
}

// str returns the expanded value of a string scalar; null is "".
func (l *loader) str(n *yaml.Node, p path) (string, bool) {
	if isNull(n) {
		return "", true
	}
	return l.scalar(n, p, "a string")
}

func (l *loader) integer(n *yaml.Node, p path) (int, bool) {
	v, ok := l.scalar(n, p, "an integer")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		var i64 int64
		if d := deref(n); d.ShortTag() == "!!int" && d.Decode(&i64) == nil && int64(int(i64)) == i64 {
			return int(i64), true
		}
		l.addf(p, "expected an integer, got %q", v)
		return 0, false
	}
	return i, true
}

func (l *loader) float(n *yaml.Node, p path) (float64, bool) {
	v, ok := l.scalar(n, p, "a number")
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		l.addf(p, "expected a number, got %q", v)
		return 0, false
	}
	return f, true
}

func (l *loader) duration(n *yaml.Node, p path) (time.Duration, bool) {
	v, ok := l.scalar(n, p, "a duration")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		l.addf(p, "invalid duration %q (use e.g. 250ms, 10s, 1h30m)", v)
		return 0, false
	}
	return d, true
}

func (l *loader) positiveDuration(n *yaml.Node, p path) (time.Duration, bool) {
	d, ok := l.duration(n, p)
	if ok && d <= 0 {
		l.addf(p, "must be greater than 0")
		return 0, false
	}
	return d, ok
}

// minInt reads an integer >= min.
func (l *loader) minInt(n *yaml.Node, p path, min int) (int, bool) {
	i, ok := l.integer(n, p)
	if ok && i < min {
		l.addf(p, "must be >= %d, got %d", min, i)
		return 0, false
	}
	return i, ok
}

// resolve makes p absolute against the config directory.
func (l *loader) resolve(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(l.dir, p)
}

// ---- the schema ----

// inherited holds the settings a source inherits from defaults.
type inherited struct {
	scheduleSpec string
	schedule     Schedule
	timeout      time.Duration
	backoff      Backoff
	breaker      Breaker
	errorAfter   int
}

func (l *loader) config(root *yaml.Node) *Config {
	cfg := &Config{
		Store:           DefaultStore,
		Concurrency:     DefaultConcurrency,
		ShutdownTimeout: DefaultShutdownTimeout,
		Admin:           Admin{Listen: DefaultAdminListen},
		Log:             Log{Level: DefaultLogLevel, Format: DefaultLogFormat},
		History:         History{Keep: DefaultHistoryKeep},
		Limits:          map[string]Limit{},
	}
	var defaultsNode, limitsNode, sourcesNode *yaml.Node
	if root != nil && !isNull(root) && deref(root).Kind != yaml.MappingNode {
		l.addf(at(l.file), "expected a mapping at the top level, got %s", describe(root))
		root = nil
	}
	ps, _ := l.pairs(root, path{})
	for _, p := range ps {
		switch p.key {
		case "store":
			if v, ok := l.scalar(p.val, at("store"), "a string"); ok {
				if strings.TrimSpace(v) == "" {
					l.addf(at("store"), "must not be empty")
				} else {
					cfg.Store = v
				}
			}
		case "concurrency":
			if v, ok := l.minInt(p.val, at("concurrency"), 1); ok {
				cfg.Concurrency = v
			}
		case "shutdown_timeout":
			if v, ok := l.positiveDuration(p.val, at("shutdown_timeout")); ok {
				cfg.ShutdownTimeout = v
			}
		case "admin":
			l.admin(p.val, &cfg.Admin)
		case "log":
			l.log(p.val, &cfg.Log)
		case "history":
			hp, _ := l.pairs(p.val, at("history"))
			for _, h := range hp {
				switch h.key {
				case "keep":
					if v, ok := l.minInt(h.val, at("history.keep"), 1); ok {
						cfg.History.Keep = v
					}
				default:
					l.addf(at("history").key(h.key), "unknown key")
				}
			}
		case "defaults":
			defaultsNode = p.val
		case "limits":
			limitsNode = p.val
		case "sources":
			sourcesNode = p.val
		default:
			l.addf(path{}.key(p.key), "unknown key")
		}
	}
	if isPostgresURL(cfg.Store) {
		// A password written in the URL itself is a secret too.
		if u, err := url.Parse(cfg.Store); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				l.secret(pw)
			}
		}
	} else {
		cfg.Store = l.resolve(cfg.Store)
	}
	base := l.defaults(defaultsNode)
	groups := l.limits(limitsNode, cfg.Limits)
	cfg.Sources, cfg.byName = l.sources(sourcesNode, base, groups)
	return cfg
}

func (l *loader) admin(n *yaml.Node, a *Admin) {
	ps, _ := l.pairs(n, at("admin"))
	for _, p := range ps {
		kp := at("admin").key(p.key)
		switch p.key {
		case "listen":
			v, ok := l.str(p.val, kp)
			if !ok {
				continue
			}
			a.Listen = v
			if v == "" {
				continue
			}
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				l.addf(kp, "invalid listen address %q: want host:port", v)
			} else if n, err := strconv.Atoi(port); port == "" || (err == nil && (n < 0 || n > 65535)) {
				l.addf(kp, "invalid port in listen address %q", v)
			}
		case "token_file":
			v, ok := l.str(p.val, kp)
			if !ok || v == "" {
				continue
			}
			a.TokenFile = l.resolve(v)
			tok, err := ReadToken(a.TokenFile)
			if err != nil {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = fmt.Errorf("cannot read token file %s: %w", a.TokenFile, pe.Err)
				}
				l.addf(kp, "%v", err)
				continue
			}
			l.secret(tok)
		default:
			l.addf(kp, "unknown key")
		}
	}
	if a.Listen != "" && a.TokenFile == "" && !isLoopback(a.Listen) {
		l.addf(at("admin").key("listen"), "%s is not a loopback address; set admin.token_file to expose the API", a.Listen)
	}
}

// isLoopback reports whether the host of a host:port address is localhost
// or a loopback IP; an address that does not parse is reported elsewhere.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (l *loader) log(n *yaml.Node, lg *Log) {
	ps, _ := l.pairs(n, at("log"))
	for _, p := range ps {
		kp := at("log").key(p.key)
		switch p.key {
		case "level":
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				switch lv := strings.ToLower(strings.TrimSpace(v)); lv {
				case "debug", "info", "warn", "error":
					lg.Level = lv
				default:
					l.addf(kp, "must be one of debug, info, warn, error; got %q", v)
				}
			}
		case "format":
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				switch f := strings.ToLower(strings.TrimSpace(v)); f {
				case "text", "json":
					lg.Format = f
				default:
					l.addf(kp, "must be text or json; got %q", v)
				}
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
}

// defaults reads the defaults section on top of the built-in defaults. An
// invalid value is reported and the built-in value kept, so that sources
// inheriting it are not reported again.
func (l *loader) defaults(n *yaml.Node) inherited {
	b := inherited{
		scheduleSpec: DefaultSchedule,
		schedule:     Every{D: time.Minute},
		timeout:      DefaultTimeout,
		backoff:      DefaultBackoff(),
		breaker:      DefaultBreaker(),
		errorAfter:   DefaultErrorAfter,
	}
	ps, _ := l.pairs(n, at("defaults"))
	for _, p := range ps {
		if !l.common(&b, p, at("defaults")) {
			l.addf(at("defaults").key(p.key), "unknown key")
		}
	}
	return b
}

// common handles a key shared by defaults and sources; it reports whether
// key is one of them.
func (l *loader) common(b *inherited, p pair, prefix path) bool {
	kp := prefix.key(p.key)
	switch p.key {
	case "schedule":
		if v, ok := l.scalar(p.val, kp, "a schedule"); ok {
			if c, ok := l.schedules[v]; ok {
				b.scheduleSpec, b.schedule = c.spec, c.sched
				break
			}
			s, err := parseSchedule(v)
			if err != nil {
				var ce *cronError
				if errors.As(err, &ce) && l.containsSecret(v) {
					// The parser's message may quote parts of a secret.
					err = errors.New("invalid cron expression")
				}
				l.addf(kp, "invalid schedule %q: %v", v, err)
			} else {
				b.scheduleSpec, b.schedule = strings.TrimSpace(v), s
				if l.schedules != nil {
					l.schedules[v] = parsedSchedule{spec: b.scheduleSpec, sched: s}
				}
			}
		}
	case "timeout":
		if v, ok := l.positiveDuration(p.val, kp); ok {
			b.timeout = v
		}
	case "backoff":
		b.backoff = l.backoff(p.val, kp, b.backoff)
	case "breaker":
		b.breaker = l.breaker(p.val, kp, b.breaker)
	case "error_after":
		if v, ok := l.minInt(p.val, kp, 0); ok {
			b.errorAfter = v
		}
	default:
		return false
	}
	return true
}

// backoff overrides the given subkeys of base. If the result is invalid it
// is reported and base returned.
func (l *loader) backoff(n *yaml.Node, where path, base Backoff) Backoff {
	ps, ok := l.pairs(n, where)
	if !ok {
		return base
	}
	b := base
	var gotInitial, gotMax bool
	for _, p := range ps {
		kp := where.key(p.key)
		switch p.key {
		case "initial":
			if v, ok := l.positiveDuration(p.val, kp); ok {
				b.Initial, gotInitial = v, true
			}
		case "max":
			if v, ok := l.positiveDuration(p.val, kp); ok {
				b.Max, gotMax = v, true
			}
		case "multiplier":
			if v, ok := l.float(p.val, kp); ok {
				if v < 1 {
					l.addf(kp, "must be >= 1, got %v", v)
				} else {
					b.Multiplier = v
				}
			}
		case "jitter":
			if v, ok := l.float(p.val, kp); ok {
				if v < 0 || v >= 1 {
					l.addf(kp, "must be >= 0 and < 1, got %v", v)
				} else {
					b.Jitter = v
				}
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
	if b.Max < b.Initial {
		bad := where.key("max")
		if gotInitial && !gotMax {
			bad = where.key("initial")
		}
		l.addf(bad, "max (%s) must be >= initial (%s)", b.Max, b.Initial)
		return base
	}
	return b
}

func (l *loader) breaker(n *yaml.Node, where path, base Breaker) Breaker {
	ps, ok := l.pairs(n, where)
	if !ok {
		return base
	}
	b := base
	for _, p := range ps {
		kp := where.key(p.key)
		switch p.key {
		case "failures":
			if v, ok := l.minInt(p.val, kp, 0); ok {
				b.Failures = v
			}
		case "cooldown":
			if v, ok := l.positiveDuration(p.val, kp); ok {
				b.Cooldown = v
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
	return b
}

// limits fills out and returns the set of declared group names (valid or
// not, so that a source naming a broken group is not reported twice).
func (l *loader) limits(n *yaml.Node, out map[string]Limit) map[string]bool {
	groups := map[string]bool{}
	ps, _ := l.pairs(n, at("limits"))
	for _, p := range ps {
		gpath := at("limits").key(p.key)
		groups[p.key] = true
		if !validName(p.key) {
			l.addf(gpath, "invalid group name: must match [a-z0-9][a-z0-9._-]* and be at most %d characters", MaxNameLen)
		}
		lim := Limit{Burst: 1}
		gp, ok := l.pairs(p.val, gpath)
		if !ok {
			continue
		}
		for _, g := range gp {
			kp := gpath.key(g.key)
			switch g.key {
			case "concurrency":
				if v, ok := l.minInt(g.val, kp, 1); ok {
					lim.Concurrency = v
				}
			case "rate":
				if v, ok := l.scalar(g.val, kp, "a rate"); ok {
					r, err := parseRate(v)
					if err != nil {
						l.addf(kp, "invalid rate %q: %v", v, err)
						lim.Rate = -1
					} else {
						lim.Rate = r
					}
				} else {
					lim.Rate = -1
				}
			case "burst":
				if v, ok := l.minInt(g.val, kp, 1); ok {
					lim.Burst = v
				}
			default:
				l.addf(kp, "unknown key")
			}
		}
		if lim.Concurrency == 0 && lim.Rate == 0 {
			l.addf(gpath, "needs concurrency, rate or both")
		}
		if lim.Rate < 0 {
			lim.Rate = 0
		}
		out[p.key] = lim
	}
	return groups
}

// validName reports whether s is a valid source or group name: at most
// MaxNameLen bytes matching [a-z0-9][a-z0-9._-]*.
func validName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			continue
		}
		if i == 0 || (c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// isVarName reports whether s is an environment variable name that ${...}
// accepts: [A-Za-z_][A-Za-z0-9_]*.
func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// sourceName reads a source's name without reporting anything.
func (l *loader) sourceName(n *yaml.Node) string {
	// The common case: a mapping without merge keys whose name is a plain
	// string. The first such key is the one pairs would return.
	if d := deref(n); d != nil && d.Kind == yaml.MappingNode {
		var val *yaml.Node
		merges := false
		for i := 0; i+1 < len(d.Content); i += 2 {
			k := deref(d.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode {
				continue // reported by source
			}
			if k.ShortTag() == "!!merge" {
				merges = true
				continue
			}
			if k.Value == "name" {
				val = d.Content[i+1]
				break
			}
		}
		if val == nil && !merges {
			return ""
		}
		if v := deref(val); v != nil && v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null" && !strings.Contains(v.Value, "$") {
			return v.Value
		}
	}
	q := &loader{dir: l.dir, env: l.env, quiet: true}
	ps, _ := q.pairs(n, path{})
	for _, p := range ps {
		if p.key == "name" {
			v, _ := q.scalar(p.val, path{}, "")
			return v
		}
	}
	return ""
}

// sources returns the sources and an index of them by name (valid only when
// no problem is reported, which is the only case where Load returns it).
func (l *loader) sources(n *yaml.Node, b inherited, groups map[string]bool) ([]Source, map[string]int) {
	items, _ := l.items(n, at("sources"))
	names := make([]string, len(items))
	first := make(map[string]int, len(items)) // name -> index of its first source
	var dup map[string]bool                   // names of more than one source
	for i, it := range items {
		names[i] = l.sourceName(it)
		if names[i] == "" {
			continue
		}
		if _, ok := first[names[i]]; !ok {
			first[names[i]] = i
		} else {
			if dup == nil {
				dup = map[string]bool{}
			}
			dup[names[i]] = true
		}
	}
	out := make([]Source, 0, len(items))
	for i, it := range items {
		prefix := sourcePath(i, "")
		if !dup[names[i]] && validName(names[i]) {
			prefix = sourcePath(i, names[i])
		}
		if dup[names[i]] && first[names[i]] != i {
			l.addf(sourcePath(i, "").key("name"), "duplicate name %q (also used by sources[%d])", names[i], first[names[i]])
		}
		if s, ok := l.source(it, prefix, b, groups); ok {
			out = append(out, s)
		}
	}
	if len(out) != len(items) || len(first) != len(out) {
		// Not every source made it: Load fails, but keep the index right.
		first = make(map[string]int, len(out))
		for i := range out {
			first[out[i].Name] = i
		}
	}
	return out, first
}

func (l *loader) source(n *yaml.Node, prefix path, b inherited, groups map[string]bool) (Source, bool) {
	ps, ok := l.pairs(n, prefix)
	if !ok {
		return Source{}, false
	}
	s := Source{Method: DefaultMethod, MaxBody: DefaultMaxBody}
	var hasName, hasType bool
	for _, p := range ps {
		switch p.key {
		case "name":
			hasName = true
			kp := prefix.key("name")
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				s.Name = v
				if !validName(v) {
					l.addf(kp, "invalid name %q: must match [a-z0-9][a-z0-9._-]* and be at most %d characters", v, MaxNameLen)
				}
			}
		case "type":
			hasType = true
			kp := prefix.key("type")
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				if v != "http" && v != "exec" {
					l.addf(kp, "must be http or exec, got %q", v)
				} else {
					s.Type = v
				}
			}
		}
	}
	if !hasName {
		l.addf(prefix.key("name"), "required")
	}
	if !hasType {
		l.addf(prefix.key("type"), "required (http or exec)")
	}
	var hasURL, hasCommand bool
	for _, p := range ps {
		kp := prefix.key(p.key)
		if (s.Type == "exec" && isHTTPKey(p.key)) || (s.Type == "http" && isExecKey(p.key)) {
			l.addf(kp, "not allowed for type %s", s.Type)
			continue
		}
		switch p.key {
		case "name", "type":
		case "limit":
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				if !groups[v] {
					l.addf(kp, "unknown limit group %q (not defined in limits)", v)
				} else {
					s.Limit = v
				}
			}
		case "url":
			hasURL = true
			if v, ok := l.scalar(p.val, kp, "a URL"); ok {
				s.URL = v
				u, err := url.Parse(v)
				switch {
				case err != nil:
					l.addf(kp, "invalid URL")
				case u.Scheme != "http" && u.Scheme != "https":
					l.addf(kp, "invalid URL: scheme must be http or https")
				case u.Host == "" || u.Hostname() == "":
					l.addf(kp, "invalid URL: missing host")
				}
			}
		case "method":
			if v, ok := l.scalar(p.val, kp, "a string"); ok {
				if !isToken(v) {
					l.addf(kp, "invalid HTTP method %q", v)
				} else {
					s.Method = strings.ToUpper(v)
				}
			}
		case "headers":
			s.Headers = l.headers(p.val, kp)
		case "body":
			if v, ok := l.str(p.val, kp); ok {
				s.Body = v
			}
		case "expect_status":
			s.ExpectStatus = l.expectStatus(p.val, kp)
		case "max_body":
			if v, ok := l.scalar(p.val, kp, "a size"); ok {
				if sz, err := parseSize(v); err != nil {
					l.addf(kp, "invalid size %q: %v", v, err)
				} else if sz <= 0 {
					l.addf(kp, "must be greater than 0")
				} else {
					s.MaxBody = sz
				}
			}
		case "command":
			hasCommand = true
			s.Command = l.command(p.val, kp)
		case "env":
			s.Env = l.envMap(p.val, kp)
		case "dir":
			if v, ok := l.str(p.val, kp); ok && v != "" {
				s.Dir = l.resolve(v)
				r, ok := l.dirs[s.Dir]
				if !ok {
					fi, err := os.Stat(s.Dir)
					r = dirResult{missing: err != nil, notDir: err == nil && !fi.IsDir()}
					l.dirs[s.Dir] = r
				}
				if r.missing {
					l.addf(kp, "directory %s does not exist", s.Dir)
				} else if r.notDir {
					l.addf(kp, "%s is not a directory", s.Dir)
				}
			}
		default:
			if !l.common(&b, p, prefix) {
				l.addf(kp, "unknown key")
			}
		}
	}
	switch s.Type {
	case "http":
		if !hasURL {
			l.addf(prefix.key("url"), "required for type http")
		}
	case "exec":
		if !hasCommand {
			l.addf(prefix.key("command"), "required for type exec")
		}
		// http-only fields stay zero for exec sources.
		s.Method, s.MaxBody = "", 0
	}
	s.ScheduleSpec, s.Schedule = b.scheduleSpec, b.schedule
	s.Timeout, s.Backoff, s.Breaker, s.ErrorAfter = b.timeout, b.backoff, b.breaker, b.errorAfter
	s.Fingerprint, l.fpBuf = l.fp.fingerprint(l.fpBuf, &s)
	return s, true
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func (l *loader) headers(n *yaml.Node, where path) map[string]string {
	ps, _ := l.pairs(n, where)
	if len(ps) == 0 {
		return nil
	}
	h := make(map[string]string, len(ps))
	// names seen so far, first spelling; header names are tokens (ASCII),
	// so EqualFold is ToLower equality.
	var buf [8]string
	names := buf[:0]
	for _, p := range ps {
		kp := where.key(p.key)
		if !isToken(p.key) {
			l.addf(kp, "invalid header name")
			continue
		}
		if prev := sameName(names, p.key); prev != "" {
			l.addf(kp, "duplicate header (same as %s, header names are case-insensitive)", prev)
			continue
		}
		names = append(names, p.key)
		v, ok := l.str(p.val, kp)
		if !ok {
			continue
		}
		l.secret(v)
		if strings.ContainsAny(v, "\r\n\x00") {
			l.addf(kp, "invalid header value (contains a control character)")
			continue
		}
		h[p.key] = v
	}
	return h
}

// sameName returns the first of names equal to name but for case, or "".
func sameName(names []string, name string) string {
	for _, s := range names {
		if strings.EqualFold(s, name) {
			return s
		}
	}
	return ""
}

func (l *loader) expectStatus(n *yaml.Node, where path) []int {
	items, _ := l.items(n, where)
	var out []int
	for i, it := range items {
		ip := where.index(i)
		v, ok := l.integer(it, ip)
		if !ok {
			continue
		}
		if v < 100 || v > 599 {
			l.addf(ip, "status %d is outside 100..599", v)
			continue
		}
		if out == nil {
			out = make([]int, 0, len(items))
		}
		out = append(out, v)
	}
	return out
}

func (l *loader) envMap(n *yaml.Node, where path) map[string]string {
	ps, _ := l.pairs(n, where)
	if len(ps) == 0 {
		return nil
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		kp := where.key(p.key)
		if p.key == "" || strings.ContainsAny(p.key, "=\x00") {
			l.addf(kp, "invalid environment variable name")
			continue
		}
		v, ok := l.str(p.val, kp)
		if !ok {
			continue
		}
		if strings.ContainsRune(v, 0) {
			l.addf(kp, "value contains a NUL byte")
			continue
		}
		m[p.key] = v
	}
	return m
}

func (l *loader) command(n *yaml.Node, where path) []string {
	items, ok := l.items(n, where)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		l.addf(where, "must be a non-empty list (argv)")
		return nil
	}
	argv := make([]string, len(items))
	for i, it := range items {
		ip := where.index(i)
		v, ok := l.scalar(it, ip, "a string")
		if !ok {
			continue
		}
		if strings.ContainsRune(v, 0) {
			l.addf(ip, "contains a NUL byte")
			continue
		}
		argv[i] = v
	}
	p0 := where.index(0)
	c := argv[0]
	switch {
	case c == "":
		if !isNull(items[0]) && deref(items[0]) != nil && deref(items[0]).Kind == yaml.ScalarNode {
			l.addf(p0, "must not be empty")
		}
	case strings.ContainsRune(c, '/'):
		argv[0] = l.resolve(c)
		err, ok := l.checked[argv[0]]
		if !ok {
			err = checkExecutable(argv[0])
			l.checked[argv[0]] = err
		}
		if err != "" {
			l.addf(p0, "%s: %s", argv[0], err)
		}
	default:
		r, ok := l.looked[c]
		if !ok {
			r = l.lookPath(c)
			l.looked[c] = r
		}
		switch {
		case r.path != "":
			argv[0] = r.path
		case r.emptyPATH:
			l.addf(p0, "%q not found: PATH is not set", c)
		default:
			l.addf(p0, "%q not found in PATH", c)
		}
	}
	return argv
}

// checkExecutable returns "" if p is an executable regular file, else why not.
func checkExecutable(p string) string {
	fi, err := os.Stat(p)
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return err.Error()
	case fi.IsDir():
		return "is a directory"
	case !fi.Mode().IsRegular():
		return "not a regular file"
	case fi.Mode().Perm()&0o111 == 0:
		return "not executable"
	}
	return ""
}

// lookPath searches PATH (from env) for an executable named name. Empty and
// relative PATH entries are skipped.
func (l *loader) lookPath(name string) lookResult {
	pathEnv, _ := l.env("PATH")
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if checkExecutable(p) == "" {
			return lookResult{path: p}
		}
	}
	return lookResult{emptyPATH: pathEnv == ""}
}

// isPostgresURL reports whether a store setting names a PostgreSQL server
// rather than a SQLite file (the scheme in any case, as PostgreSQL reads it).
func isPostgresURL(store string) bool {
	l := strings.ToLower(store)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}
