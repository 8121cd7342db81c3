package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pacer-dev/pacer/internal/backend"
)

// inherited holds the settings a source inherits from defaults.
type inherited struct {
	scheduleSpec string
	schedule     Schedule
	timeout      time.Duration
	backoff      Backoff
	breaker      Breaker
	errorAfter   int
	// placeholder says that a value came from an unset ${VAR}
	// (Options.ForStore): the sources' fingerprints are unknown.
	placeholder bool
	client      clientSpec    // tls, proxy_url, http2, follow_redirects (source_client.go)
	results     resultSpec    // conditional (source_results.go)
	deliver     deliverSpec   // deliver (source_deliver.go)
	conds       conditionSpec // conditions, select (source_conditions.go)
}

// config reads the top level: each section in turn, then limits (which
// sources name) and defaults (which sources inherit), then the sources.
func (l *loader) config(root *yaml.Node) *Config {
	cfg := &Config{
		Concurrency:     DefaultConcurrency,
		ShutdownTimeout: DefaultShutdownTimeout,
		Admin:           Admin{Listen: DefaultAdminListen},
		Log:             Log{Level: DefaultLogLevel, Format: DefaultLogFormat},
		History:         History{Keep: DefaultHistoryKeep},
		Limits:          map[string]Limit{},
		Cluster:         DefaultCluster(),
	}
	if root != nil && !isNull(root) && deref(root).Kind != yaml.MappingNode {
		l.addf(at(l.file), "expected a mapping at the top level, got %s", describe(root))
		root = nil
	}
	var sections topSections
	ps, _ := l.pairs(root, path{})
	for _, p := range ps {
		l.topKey(cfg, &sections, p)
	}
	l.store(cfg)
	l.checkCluster(cfg.Store, cfg.Cluster)
	files0, rec := l.files, &sourceDeps{}
	if l.fast != nil {
		l.rec = rec // what the sources inherit read (see fastSources)
	}
	base := l.defaults(sections.defaults)
	groups := l.limits(sections.limits, cfg.Limits)
	l.rec = nil
	if l.fast != nil && !isNull(sections.sources) {
		l.fast.failed = true // a list the cut did not find (flow style, a quoted key)
	} else if l.fast != nil {
		cfg.Sources, cfg.idx.byName = l.fastSources(base, groups, l.files == files0, rec.env)
	} else {
		cfg.Sources, cfg.idx.byName = l.sources(nil, sections.sources, base, groups)
	}
	l.readSourceFiles(cfg, base, groups)
	l.checkDependencies(cfg)
	l.checkHosts(cfg)
	l.checkNullSources(sections.sources, len(cfg.Sources), len(l.srcFiles.rel))
	if sections.sources == nil && len(cfg.Sources) == 0 {
		// Valid (a daemon may start empty), but likely not meant.
		l.srcFiles.notes = append(l.srcFiles.notes, "no sources: nothing will be polled (write \"sources: []\" to mean it)")
	}
	windowReader{l}.maintenance(sections.maintenance, cfg)
	return cfg
}

// checkNullSources refuses a config whose "sources:" key has no value
// (YAML null: nothing after it, or null or ~) when no source comes from
// source_files either: that is what a file cut off right after the key
// reads as (an editor's save half done), and loading it would stop every
// source on a SIGHUP. A daemon with no sources on purpose says so with an
// empty list, "sources: []". n is the number of sources read, files the
// number of source files matched.
func (l *loader) checkNullSources(n *yaml.Node, sources, files int) {
	if n == nil || !isNull(n) || sources > 0 {
		return
	}
	from := ""
	if files > 0 {
		from = fmt.Sprintf(" and the %d source file(s) matched define none", files)
	}
	l.addf(at("sources"), "has no value (null)%s: a config cut off after \"sources:\" would stop every source; "+
		"write \"sources: []\" for a daemon with no sources", from)
}

// topSections are the top-level sections read after the others, in the
// order they depend on each other rather than the file's.
type topSections struct {
	defaults, limits, sources *yaml.Node
	maintenance               *yaml.Node
}

// topKey reads one top-level key into cfg, or keeps its node in sections.
func (l *loader) topKey(cfg *Config, sections *topSections, p pair) {
	switch p.key {
	case "source_files":
		l.sourceFilePatterns(p.val)
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
	case "cluster":
		l.cluster(p.val, &cfg.Cluster)
	case "notify":
		cfg.Notify = l.notify(p.val)
	case "admin":
		l.admin(p.val, &cfg.Admin)
	case "log":
		l.log(p.val, &cfg.Log)
	case "history":
		l.history(p.val, &cfg.History)
	case "defaults":
		sections.defaults = p.val
	case "limits":
		sections.limits = p.val
	case "hosts":
		hostsReader{l}.hosts(p.val, &cfg.Hosts)
	case "sources":
		sections.sources = p.val
	case "maintenance":
		sections.maintenance = p.val
	default:
		l.unknownKey(path{}.key(p.key), p.key, topKeys())
	}
}

// store completes cfg.Store: without a store key it is the default store
// (see defaultStore); a SQLite path is made absolute; the password of a
// PostgreSQL URL is a secret.
func (l *loader) store(cfg *Config) {
	if cfg.Store == "" {
		cfg.Store = defaultStore(l.env, l.dir)
		return
	}
	if !backend.IsPostgres(cfg.Store) {
		cfg.Store = l.resolve(cfg.Store)
		return
	}
	// A password written in the URL itself is a secret too.
	l.userinfo(cfg.Store)
}

// history reads the history section.
func (l *loader) history(n *yaml.Node, h *History) {
	hp, _ := l.pairs(n, at("history"))
	for _, p := range hp {
		switch p.key {
		case "keep":
			if v, ok := l.minInt(p.val, at("history.keep"), 1); ok {
				h.Keep = v
			}
		default:
			l.unknownKey(at("history").key(p.key), p.key, historyKeys())
		}
	}
}

// admin reads the admin section; the token file is read (its content is a
// secret), and a non-loopback listen address needs one.
func (l *loader) admin(n *yaml.Node, a *Admin) {
	ps, _ := l.pairs(n, at("admin"))
	for _, p := range ps {
		kp := at("admin").key(p.key)
		switch p.key {
		case "listen":
			v, ok := l.publicStr(p.val, kp)
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
			if err != nil && l.forStore {
				continue // the admin API's, not the store commands' (Options.ForStore)
			}
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
			l.unknownKey(kp, p.key, adminKeys())
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

// log reads the log section.
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
			l.unknownKey(kp, p.key, logKeys())
		}
	}
}

// defaults reads the defaults section on top of the built-in defaults. An
// invalid value is reported and the built-in value kept, so that sources
// inheriting it are not reported again.
func (l *sourceReader) defaults(n *yaml.Node) (b inherited) {
	b = inherited{
		scheduleSpec: DefaultSchedule,
		schedule:     Every{D: time.Minute},
		timeout:      DefaultTimeout,
		backoff:      DefaultBackoff(),
		breaker:      DefaultBreaker(),
		errorAfter:   DefaultErrorAfter,
		client:       newClientSpec(),
	}
	ps, _ := l.pairs(n, at("defaults"))
	before := l.placeholders
	defer func() { b.placeholder = l.placeholders != before }()
	for _, p := range ps {
		if !l.common(&b, p, at("defaults")) {
			l.unknownKey(at("defaults").key(p.key), p.key, commonKeys())
		}
	}
	return b
}

// common handles a key shared by defaults and sources; it reports whether
// key is one of them.
func (l *sourceReader) common(b *inherited, p pair, prefix path) bool {
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
		return l.resultKey(&b.results, p, kp) || l.clientKey(&b.client, p, kp) || l.deliverKey(&b.deliver, p, kp) ||
			l.conditionKey(&b.conds, p, kp)
	}
	return true
}

// backoff overrides the given subkeys of base. If the result is invalid it
// is reported and base returned.
func (l *sourceReader) backoff(n *yaml.Node, where path, base Backoff) Backoff {
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
			l.unknownKey(kp, p.key, backoffKeys())
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

// breaker overrides the given subkeys of base.
func (l *sourceReader) breaker(n *yaml.Node, where path, base Breaker) Breaker {
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
			l.unknownKey(kp, p.key, breakerKeys())
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
				l.unknownKey(kp, g.key, limitKeys())
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
