package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// dependsOn reads a source's depends_on: a list of source names (checked
// once every source is read, by checkDependencies).
func (l *sourceReader) dependsOn(n *yaml.Node, kp path) []string {
	items, ok := l.items(n, kp)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		ip := kp.index(i)
		if v, ok := l.scalar(it, ip, "a source name"); ok {
			out = append(out, v)
		}
	}
	return out
}

// checkDependencies reports depends_on entries that name no source, name
// the source itself, or close a cycle (contract 13.4).
func (l *loader) checkDependencies(cfg *Config) {
	index := make(map[string]*Source, len(cfg.Sources))
	any := false
	for _, s := range cfg.Sources {
		index[s.Name] = s
		any = any || len(s.DependsOn) > 0
	}
	if !any {
		return
	}
	for i, s := range cfg.Sources {
		for j, d := range s.DependsOn {
			if _, ok := index[d]; !ok {
				l.addf(sourcePath(i, s.Name).key("depends_on").index(j), "unknown source %q", d)
			}
		}
	}
	l.checkCycles(cfg.Sources, index)
}

// checkCycles reports the first dependency cycle among srcs, found by
// colouring the graph (a grey node met again closes a cycle).
func (l *loader) checkCycles(srcs []*Source, index map[string]*Source) {
	const (
		white = iota
		grey
		black
	)
	colour := make(map[string]int, len(index))
	var stack []string
	var visit func(name string) []string
	visit = func(name string) []string {
		colour[name] = grey
		stack = append(stack, name)
		for _, d := range index[name].DependsOn {
			if _, ok := index[d]; !ok {
				continue
			}
			switch colour[d] {
			case grey:
				for k := range stack {
					if stack[k] == d {
						return append(append([]string{}, stack[k:]...), d)
					}
				}
			case white:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		colour[name] = black
		return nil
	}
	for i, s := range srcs {
		if colour[s.Name] != white {
			continue
		}
		stack = stack[:0]
		if c := visit(s.Name); c != nil {
			l.addf(sourcePath(i, s.Name).key("depends_on"), "dependency cycle: %s", strings.Join(c, " -> "))
			return
		}
	}
}
