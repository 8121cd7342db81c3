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
	"regexp"
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

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	varNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	yamlErrRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

var (
	httpKeys = map[string]bool{"url": true, "method": true, "headers": true, "body": true, "expect_status": true, "max_body": true}
	execKeys = map[string]bool{"command": true, "env": true, "dir": true}
)

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
		file:     path,
		dir:      filepath.Dir(abs),
		env:      env,
		secretOK: map[string]bool{},
		looked:   map[string]lookResult{},
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
	if m := yamlErrRE.FindStringSubmatch(msg); m != nil {
		return &Problem{Path: file + ":" + m[1], Msg: m[2]}
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

// loader holds the state of one Load call.
type loader struct {
	file     string // config path as given, for messages
	dir      string // absolute directory of the config file
	env      func(string) (string, bool)
	quiet    bool // drop problems and secrets (used for a pre-pass)
	probs    []pendingProblem
	secrets  []string
	secretOK map[string]bool
	looked   map[string]lookResult // exec.LookPath cache
}

// addf records a problem. String and error arguments are redacted before
// formatting.
func (l *loader) addf(path, format string, args ...any) {
	if l.quiet {
		return
	}
	l.probs = append(l.probs, pendingProblem{path: path, format: format, args: args})
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

func join(path, key string) string {
	if key == "" {
		key = `""` // an empty key, named as YAML writes it
	}
	if path == "" {
		return key
	}
	return path + "." + key
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
func (l *loader) pairs(n *yaml.Node, path string) (ps []pair, ok bool) {
	if isNull(n) {
		return nil, true
	}
	seen := map[string]bool{}
	ok = l.collectPairs(deref(n), path, seen, map[mergeVisit]bool{}, &ps, true, 0)
	return ps, ok
}

// mergeVisit is a mapping merged at a depth. Merging the same mapping again
// at the same depth adds no key (its keys are all seen by then), so each is
// merged once: aliases let a small file merge one mapping exponentially
// many times ("billion laughs").
type mergeVisit struct {
	n     *yaml.Node
	depth int
}

func (l *loader) collectPairs(n *yaml.Node, path string, seen map[string]bool, done map[mergeVisit]bool, ps *[]pair, explicit bool, depth int) bool {
	where := path
	if where == "" {
		where = l.file // the top level: the problem is the file's
	}
	if n == nil || n.Kind != yaml.MappingNode {
		l.addf(where, "expected a mapping, got %s", describe(n))
		return false
	}
	if depth > 20 {
		l.addf(where, "merge keys nested too deeply")
		return false
	}
	if done[mergeVisit{n, depth}] {
		return true
	}
	done[mergeVisit{n, depth}] = true
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
		if seen[k.Value] {
			if explicit {
				l.addf(join(path, k.Value), "duplicate key")
			}
			continue
		}
		seen[k.Value] = true
		*ps = append(*ps, pair{key: k.Value, val: v})
	}
	for _, m := range merges {
		m = deref(m)
		if m != nil && m.Kind == yaml.SequenceNode {
			for _, e := range m.Content {
				l.collectPairs(deref(e), path, seen, done, ps, false, depth+1)
			}
			continue
		}
		l.collectPairs(m, path, seen, done, ps, false, depth+1)
	}
	return true
}

// items returns the elements of a sequence node (null: none).
func (l *loader) items(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	if isNull(n) {
		return nil, true
	}
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		l.addf(path, "expected a list, got %s", describe(n))
		return nil, false
	}
	return n.Content, true
}

// expand replaces ${VAR} by its value from env and $$ by $. Substituted
// non-empty values are recorded as secrets.
func (l *loader) expand(s, path string) (string, bool) {
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
				l.addf(path, "unterminated ${ (write $$ for a literal $)")
				return b.String(), false
			}
			name := s[i+2 : i+2+end]
			i += end + 3
			if !varNameRE.MatchString(name) {
				l.addf(path, "invalid environment variable name %q in ${...} (write $$ for a literal $)", name)
				ok = false
				continue
			}
			v, set := l.env(name)
			if !set {
				l.addf(path, "environment variable %s is not set", name)
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
func (l *loader) scalar(n *yaml.Node, path, want string) (string, bool) {
	d := deref(n)
	if d == nil || d.Kind != yaml.ScalarNode || d.ShortTag() == "!!null" {
		l.addf(path, "expected %s, got %s", want, describe(n))
		return "", false
	}
	return l.expand(d.Value, path)
}

// str returns the expanded value of a string scalar; null is "".
func (l *loader) str(n *yaml.Node, path string) (string, bool) {
	if isNull(n) {
		return "", true
	}
	return l.scalar(n, path, "a string")
}

func (l *loader) integer(n *yaml.Node, path string) (int, bool) {
	v, ok := l.scalar(n, path, "an integer")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		var i64 int64
		if d := deref(n); d.ShortTag() == "!!int" && d.Decode(&i64) == nil && int64(int(i64)) == i64 {
			return int(i64), true
		}
		l.addf(path, "expected an integer, got %q", v)
		return 0, false
	}
	return i, true
}

func (l *loader) float(n *yaml.Node, path string) (float64, bool) {
	v, ok := l.scalar(n, path, "a number")
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		l.addf(path, "expected a number, got %q", v)
		return 0, false
	}
	return f, true
}

func (l *loader) duration(n *yaml.Node, path string) (time.Duration, bool) {
	v, ok := l.scalar(n, path, "a duration")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		l.addf(path, "invalid duration %q (use e.g. 250ms, 10s, 1h30m)", v)
		return 0, false
	}
	return d, true
}

func (l *loader) positiveDuration(n *yaml.Node, path string) (time.Duration, bool) {
	d, ok := l.duration(n, path)
	if ok && d <= 0 {
		l.addf(path, "must be greater than 0")
		return 0, false
	}
	return d, ok
}

// minInt reads an integer >= min.
func (l *loader) minInt(n *yaml.Node, path string, min int) (int, bool) {
	i, ok := l.integer(n, path)
	if ok && i < min {
		l.addf(path, "must be >= %d, got %d", min, i)
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
	storeSet := false
	var defaultsNode, limitsNode, sourcesNode *yaml.Node
	if root != nil && !isNull(root) && deref(root).Kind != yaml.MappingNode {
		l.addf(l.file, "expected a mapping at the top level, got %s", describe(root))
		root = nil
	}
	ps, _ := l.pairs(root, "")
	for _, p := range ps {
		switch p.key {
		case "store":
			if v, ok := l.scalar(p.val, "store", "a string"); ok {
				if strings.TrimSpace(v) == "" {
					l.addf("store", "must not be empty")
				} else {
					cfg.Store, storeSet = v, true
				}
			}
		case "concurrency":
			if v, ok := l.minInt(p.val, "concurrency", 1); ok {
				cfg.Concurrency = v
			}
		case "shutdown_timeout":
			if v, ok := l.positiveDuration(p.val, "shutdown_timeout"); ok {
				cfg.ShutdownTimeout = v
			}
		case "admin":
			l.admin(p.val, &cfg.Admin)
		case "log":
			l.log(p.val, &cfg.Log)
		case "history":
			hp, _ := l.pairs(p.val, "history")
			for _, h := range hp {
				switch h.key {
				case "keep":
					if v, ok := l.minInt(h.val, "history.keep", 1); ok {
						cfg.History.Keep = v
					}
				default:
					l.addf(join("history", h.key), "unknown key")
				}
			}
		case "defaults":
			defaultsNode = p.val
		case "limits":
			limitsNode = p.val
		case "sources":
			sourcesNode = p.val
		default:
			l.addf(join("", p.key), "unknown key")
		}
	}
	if !storeSet || !(strings.HasPrefix(cfg.Store, "postgres://") || strings.HasPrefix(cfg.Store, "postgresql://")) {
		cfg.Store = l.resolve(cfg.Store)
	}
	base := l.defaults(defaultsNode)
	groups := l.limits(limitsNode, cfg.Limits)
	cfg.Sources = l.sources(sourcesNode, base, groups)
	cfg.byName = make(map[string]int, len(cfg.Sources))
	for i, s := range cfg.Sources {
		cfg.byName[s.Name] = i
	}
	return cfg
}

func (l *loader) admin(n *yaml.Node, a *Admin) {
	ps, _ := l.pairs(n, "admin")
	for _, p := range ps {
		path := join("admin", p.key)
		switch p.key {
		case "listen":
			v, ok := l.str(p.val, path)
			if !ok {
				continue
			}
			a.Listen = v
			if v == "" {
				continue
			}
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				l.addf(path, "invalid listen address %q: want host:port", v)
			} else if n, err := strconv.Atoi(port); port == "" || (err == nil && (n < 0 || n > 65535)) {
				l.addf(path, "invalid port in listen address %q", v)
			}
		case "token_file":
			v, ok := l.str(p.val, path)
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
				l.addf(path, "%v", err)
				continue
			}
			l.secret(tok)
		default:
			l.addf(path, "unknown key")
		}
	}
}

func (l *loader) log(n *yaml.Node, lg *Log) {
	ps, _ := l.pairs(n, "log")
	for _, p := range ps {
		path := join("log", p.key)
		switch p.key {
		case "level":
			if v, ok := l.scalar(p.val, path, "a string"); ok {
				switch lv := strings.ToLower(strings.TrimSpace(v)); lv {
				case "debug", "info", "warn", "error":
					lg.Level = lv
				default:
					l.addf(path, "must be one of debug, info, warn, error; got %q", v)
				}
			}
		case "format":
			if v, ok := l.scalar(p.val, path, "a string"); ok {
				switch f := strings.ToLower(strings.TrimSpace(v)); f {
				case "text", "json":
					lg.Format = f
				default:
					l.addf(path, "must be text or json; got %q", v)
				}
			}
		default:
			l.addf(path, "unknown key")
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
	ps, _ := l.pairs(n, "defaults")
	for _, p := range ps {
		if !l.common(&b, p, "defaults") {
			l.addf(join("defaults", p.key), "unknown key")
		}
	}
	return b
}

// common handles a key shared by defaults and sources; it reports whether
// key is one of them.
func (l *loader) common(b *inherited, p pair, prefix string) bool {
	path := join(prefix, p.key)
	switch p.key {
	case "schedule":
		if v, ok := l.scalar(p.val, path, "a schedule"); ok {
			s, err := parseSchedule(v)
			if err != nil {
				var ce *cronError
				if errors.As(err, &ce) && l.containsSecret(v) {
					// The parser's message may quote parts of a secret.
					err = errors.New("invalid cron expression")
				}
				l.addf(path, "invalid schedule %q: %v", v, err)
			} else {
				b.scheduleSpec, b.schedule = strings.TrimSpace(v), s
			}
		}
	case "timeout":
		if v, ok := l.positiveDuration(p.val, path); ok {
			b.timeout = v
		}
	case "backoff":
		b.backoff = l.backoff(p.val, path, b.backoff)
	case "breaker":
		b.breaker = l.breaker(p.val, path, b.breaker)
	case "error_after":
		if v, ok := l.minInt(p.val, path, 0); ok {
			b.errorAfter = v
		}
	default:
		return false
	}
	return true
}

// backoff overrides the given subkeys of base. If the result is invalid it
// is reported and base returned.
func (l *loader) backoff(n *yaml.Node, path string, base Backoff) Backoff {
	ps, ok := l.pairs(n, path)
	if !ok {
		return base
	}
	b := base
	var gotInitial, gotMax bool
	for _, p := range ps {
		kp := join(path, p.key)
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
		where := join(path, "max")
		if gotInitial && !gotMax {
			where = join(path, "initial")
		}
		l.addf(where, "max (%s) must be >= initial (%s)", b.Max, b.Initial)
		return base
	}
	return b
}

func (l *loader) breaker(n *yaml.Node, path string, base Breaker) Breaker {
	ps, ok := l.pairs(n, path)
	if !ok {
		return base
	}
	b := base
	for _, p := range ps {
		kp := join(path, p.key)
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
	ps, _ := l.pairs(n, "limits")
	for _, p := range ps {
		path := join("limits", p.key)
		groups[p.key] = true
		if !validName(p.key) {
			l.addf(path, "invalid group name: must match [a-z0-9][a-z0-9._-]* and be at most %d characters", MaxNameLen)
		}
		lim := Limit{Burst: 1}
		gp, ok := l.pairs(p.val, path)
		if !ok {
			continue
		}
		for _, g := range gp {
			kp := join(path, g.key)
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
			l.addf(path, "needs concurrency, rate or both")
		}
		if lim.Rate < 0 {
			lim.Rate = 0
		}
		out[p.key] = lim
	}
	return groups
}

func validName(s string) bool {
	return len(s) <= MaxNameLen && nameRE.MatchString(s)
}

// sourceName reads a source's name without reporting anything.
func (l *loader) sourceName(n *yaml.Node) string {
	q := &loader{dir: l.dir, env: l.env, quiet: true}
	ps, _ := q.pairs(n, "")
	for _, p := range ps {
		if p.key == "name" {
			v, _ := q.scalar(p.val, "", "")
			return v
		}
	}
	return ""
}

func (l *loader) sources(n *yaml.Node, b inherited, groups map[string]bool) []Source {
	items, _ := l.items(n, "sources")
	names := make([]string, len(items))
	first := map[string]int{}
	count := map[string]int{}
	for i, it := range items {
		names[i] = l.sourceName(it)
		if names[i] == "" {
			continue
		}
		if _, ok := first[names[i]]; !ok {
			first[names[i]] = i
		}
		count[names[i]]++
	}
	out := make([]Source, 0, len(items))
	for i, it := range items {
		prefix := fmt.Sprintf("sources[%d]", i)
		if validName(names[i]) && count[names[i]] == 1 {
			prefix = "sources[name=" + names[i] + "]"
		}
		if count[names[i]] > 1 && first[names[i]] != i {
			l.addf(fmt.Sprintf("sources[%d].name", i), "duplicate name %q (also used by sources[%d])", names[i], first[names[i]])
		}
		if s, ok := l.source(it, prefix, b, groups); ok {
			out = append(out, s)
		}
	}
	return out
}

func (l *loader) source(n *yaml.Node, prefix string, b inherited, groups map[string]bool) (Source, bool) {
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
			path := join(prefix, "name")
			if v, ok := l.scalar(p.val, path, "a string"); ok {
				s.Name = v
				if !validName(v) {
					l.addf(path, "invalid name %q: must match [a-z0-9][a-z0-9._-]* and be at most %d characters", v, MaxNameLen)
				}
			}
		case "type":
			hasType = true
			path := join(prefix, "type")
			if v, ok := l.scalar(p.val, path, "a string"); ok {
				if v != "http" && v != "exec" {
					l.addf(path, "must be http or exec, got %q", v)
				} else {
					s.Type = v
				}
			}
		}
	}
	if !hasName {
		l.addf(join(prefix, "name"), "required")
	}
	if !hasType {
		l.addf(join(prefix, "type"), "required (http or exec)")
	}
	var hasURL, hasCommand bool
	for _, p := range ps {
		path := join(prefix, p.key)
		if (s.Type == "exec" && httpKeys[p.key]) || (s.Type == "http" && execKeys[p.key]) {
			l.addf(path, "not allowed for type %s", s.Type)
			continue
		}
		switch p.key {
		case "name", "type":
		case "limit":
			if v, ok := l.scalar(p.val, path, "a string"); ok {
				if !groups[v] {
					l.addf(path, "unknown limit group %q (not defined in limits)", v)
				} else {
					s.Limit = v
				}
			}
		case "url":
			hasURL = true
			if v, ok := l.scalar(p.val, path, "a URL"); ok {
				s.URL = v
				u, err := url.Parse(v)
				switch {
				case err != nil:
					l.addf(path, "invalid URL")
				case u.Scheme != "http" && u.Scheme != "https":
					l.addf(path, "invalid URL: scheme must be http or https")
				case u.Host == "" || u.Hostname() == "":
					l.addf(path, "invalid URL: missing host")
				}
			}
		case "method":
			if v, ok := l.scalar(p.val, path, "a string"); ok {
				if !isToken(v) {
					l.addf(path, "invalid HTTP method %q", v)
				} else {
					s.Method = strings.ToUpper(v)
				}
			}
		case "headers":
			s.Headers = l.headers(p.val, path)
		case "body":
			if v, ok := l.str(p.val, path); ok {
				s.Body = v
			}
		case "expect_status":
			s.ExpectStatus = l.expectStatus(p.val, path)
		case "max_body":
			if v, ok := l.scalar(p.val, path, "a size"); ok {
				if sz, err := parseSize(v); err != nil {
					l.addf(path, "invalid size %q: %v", v, err)
				} else if sz <= 0 {
					l.addf(path, "must be greater than 0")
				} else {
					s.MaxBody = sz
				}
			}
		case "command":
			hasCommand = true
			s.Command = l.command(p.val, path)
		case "env":
			s.Env = l.envMap(p.val, path)
		case "dir":
			if v, ok := l.str(p.val, path); ok && v != "" {
				s.Dir = l.resolve(v)
				if fi, err := os.Stat(s.Dir); err != nil {
					l.addf(path, "directory %s does not exist", s.Dir)
				} else if !fi.IsDir() {
					l.addf(path, "%s is not a directory", s.Dir)
				}
			}
		default:
			if !l.common(&b, p, prefix) {
				l.addf(path, "unknown key")
			}
		}
	}
	switch s.Type {
	case "http":
		if !hasURL {
			l.addf(join(prefix, "url"), "required for type http")
		}
	case "exec":
		if !hasCommand {
			l.addf(join(prefix, "command"), "required for type exec")
		}
		// http-only fields stay zero for exec sources.
		s.Method, s.MaxBody = "", 0
	}
	s.ScheduleSpec, s.Schedule = b.scheduleSpec, b.schedule
	s.Timeout, s.Backoff, s.Breaker, s.ErrorAfter = b.timeout, b.backoff, b.breaker, b.errorAfter
	s.Fingerprint = Fingerprint(&s)
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

func (l *loader) headers(n *yaml.Node, path string) map[string]string {
	ps, _ := l.pairs(n, path)
	if len(ps) == 0 {
		return nil
	}
	h := make(map[string]string, len(ps))
	lower := map[string]string{}
	for _, p := range ps {
		kp := join(path, p.key)
		if !isToken(p.key) {
			l.addf(kp, "invalid header name")
			continue
		}
		if prev, ok := lower[strings.ToLower(p.key)]; ok {
			l.addf(kp, "duplicate header (same as %s, header names are case-insensitive)", prev)
			continue
		}
		lower[strings.ToLower(p.key)] = p.key
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

func (l *loader) expectStatus(n *yaml.Node, path string) []int {
	items, _ := l.items(n, path)
	var out []int
	for i, it := range items {
		ip := fmt.Sprintf("%s[%d]", path, i)
		v, ok := l.integer(it, ip)
		if !ok {
			continue
		}
		if v < 100 || v > 599 {
			l.addf(ip, "status %d is outside 100..599", v)
			continue
		}
		out = append(out, v)
	}
	return out
}

func (l *loader) envMap(n *yaml.Node, path string) map[string]string {
	ps, _ := l.pairs(n, path)
	if len(ps) == 0 {
		return nil
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		kp := join(path, p.key)
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

func (l *loader) command(n *yaml.Node, path string) []string {
	items, ok := l.items(n, path)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		l.addf(path, "must be a non-empty list (argv)")
		return nil
	}
	argv := make([]string, len(items))
	for i, it := range items {
		ip := fmt.Sprintf("%s[%d]", path, i)
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
	p0 := path + "[0]"
	c := argv[0]
	switch {
	case c == "":
		if !isNull(items[0]) && deref(items[0]) != nil && deref(items[0]).Kind == yaml.ScalarNode {
			l.addf(p0, "must not be empty")
		}
	case strings.ContainsRune(c, '/'):
		argv[0] = l.resolve(c)
		if err := checkExecutable(argv[0]); err != "" {
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
