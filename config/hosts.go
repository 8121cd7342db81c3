package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Hosts is the hosts section (contract section 13): the settings of every
// host group and the overrides of some. Without the section (Present
// false) every per-host rule is off and sections 1-12 hold as before.
type Hosts struct {
	Present bool
	// Default is what a host without an override gets.
	Default HostSettings
	// Overrides maps a host group name (lowercased host[:port]) to its
	// effective settings: Default with the override's keys on top.
	Overrides map[string]HostSettings
}

// HostSettings are one host group's effective settings.
type HostSettings struct {
	Concurrency int     // polls in flight per host; 0 = no cap
	Rate        float64 // starts per second; 0 = none
	Burst       int
	Breaker     HostBreaker
	Adaptive    bool
}

// HostBreaker is the host breaker of rule 13.3; Failures 0 = off.
type HostBreaker struct {
	Sources, Failures int
	Window, Cooldown  time.Duration
}

// DefaultHostSettings are the settings of a host in a hosts section that
// does not set them: no cap, no rate, the breaker off.
func DefaultHostSettings() HostSettings {
	return HostSettings{Burst: 1, Breaker: HostBreaker{Sources: 2, Window: time.Minute, Cooldown: time.Minute}}
}

// For is the effective settings of host (an override or the default).
func (h *Hosts) For(host string) HostSettings {
	if s, ok := h.Overrides[host]; ok {
		return s
	}
	return h.Default
}

// Active reports whether any per-host rule can apply: the section is
// present (rule 13.2's throttling then holds for every host).
func (h *Hosts) Active() bool { return h.Present }

// HostOf is the host group of an http URL (rule 13.1): its host and port,
// lowercased, the scheme's default port left out; false when rawURL has no
// host.
func HostOf(rawURL string) (string, bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]", true
		}
		return host, true
	}
	return net.JoinHostPort(host, port), true
}

// hostsReader reads the hosts section (a loader's, apart from its own
// methods so that each type stays small).
type hostsReader struct{ *loader }

// hosts reads the hosts section into h.
func (l hostsReader) hosts(n *yaml.Node, h *Hosts) {
	h.Present = true
	h.Default = DefaultHostSettings()
	ps, ok := l.pairs(n, at("hosts"))
	if !ok {
		return
	}
	var overrides *yaml.Node
	for _, p := range ps {
		if p.key == "overrides" {
			overrides = p.val
			continue
		}
		l.hostKey(&h.Default, p, at("hosts").key(p.key))
	}
	l.checkAdaptive(h.Default, at("hosts"))
	if overrides == nil {
		return
	}
	h.Overrides = map[string]HostSettings{}
	ops, _ := l.pairs(overrides, at("hosts.overrides"))
	for _, o := range ops {
		hp := at("hosts.overrides").key(o.key)
		name, err := hostName(o.key)
		if err != nil {
			l.addf(hp, "%v", err)
			continue
		}
		s := h.Default
		kps, ok := l.pairs(o.val, hp)
		if !ok {
			continue
		}
		for _, kp := range kps {
			if kp.key == "overrides" {
				l.addf(hp.key(kp.key), "unknown key")
				continue
			}
			l.hostKey(&s, kp, hp.key(kp.key))
		}
		l.checkAdaptive(s, hp)
		h.Overrides[name] = s
	}
}

// hostKey reads one key of a host's settings into s.
func (l hostsReader) hostKey(s *HostSettings, p pair, kp path) {
	switch p.key {
	case "concurrency":
		if v, ok := l.minInt(p.val, kp, 0); ok {
			s.Concurrency = v
		}
	case "rate":
		if v, ok := l.scalar(p.val, kp, "a rate"); ok {
			if v == "0" {
				s.Rate = 0
			} else if r, err := parseRate(v); err != nil {
				l.addf(kp, "invalid rate %q: %v", v, err)
			} else {
				s.Rate = r
			}
		}
	case "burst":
		if v, ok := l.minInt(p.val, kp, 1); ok {
			s.Burst = v
		}
	case "adaptive":
		if v, ok := l.boolean(p.val, kp); ok {
			s.Adaptive = v
		}
	case "breaker":
		l.hostBreaker(p.val, kp, &s.Breaker)
	default:
		l.addf(kp, "unknown key")
	}
}

// hostBreaker reads a host breaker block over b.
func (l hostsReader) hostBreaker(n *yaml.Node, where path, b *HostBreaker) {
	ps, _ := l.pairs(n, where)
	for _, p := range ps {
		kp := where.key(p.key)
		switch p.key {
		case "sources":
			if v, ok := l.minInt(p.val, kp, 1); ok {
				b.Sources = v
			}
		case "failures":
			if v, ok := l.minInt(p.val, kp, 0); ok {
				b.Failures = v
			}
		case "window":
			if v, ok := l.positiveDuration(p.val, kp); ok {
				b.Window = v
			}
		case "cooldown":
			if v, ok := l.positiveDuration(p.val, kp); ok {
				b.Cooldown = v
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
}

// checkAdaptive refuses adaptive with nothing to bound what it learns.
func (l hostsReader) checkAdaptive(s HostSettings, where path) {
	if s.Adaptive && s.Concurrency == 0 && s.Rate == 0 {
		l.addf(where.key("adaptive"), "needs concurrency or rate to bound what it learns")
	}
}

// hostName normalises an override's key to a host group name: a host or
// host:port, lowercased, with no scheme, path or user info.
func hostName(key string) (string, error) {
	k := strings.ToLower(strings.TrimSpace(key))
	if k == "" || strings.ContainsAny(k, "/@?# \t") {
		return "", fmt.Errorf("invalid host %q: want a host name or host:port", key)
	}
	h, ok := HostOf("http://" + k)
	if !ok {
		return "", fmt.Errorf("invalid host %q: want a host name or host:port", key)
	}
	host := h
	if hh, port, err := net.SplitHostPort(h); err == nil {
		host = hh
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("invalid port in host %q", key)
		}
	}
	host = strings.Trim(host, "[]")
	if net.ParseIP(host) == nil && !validHostname(host) {
		return "", fmt.Errorf("invalid host %q: want a host name or host:port", key)
	}
	return h, nil
}

// validHostname reports whether s is a DNS name: dot-separated labels of
// letters, digits and hyphens, none empty or over 63 bytes.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// checkHosts notes the overrides that name no host any source uses (a
// warning, not an error: the source may come back).
func (l *loader) checkHosts(cfg *Config) {
	if len(cfg.Hosts.Overrides) == 0 {
		return
	}
	used := map[string]bool{}
	for _, s := range cfg.Sources {
		if s.Host != "" {
			used[s.Host] = true
		}
	}
	for _, h := range slices.Sorted(maps.Keys(cfg.Hosts.Overrides)) {
		if !used[h] {
			l.srcFiles.notes = append(l.srcFiles.notes, fmt.Sprintf("hosts.overrides.%s: no source calls this host", h))
		}
	}
}
