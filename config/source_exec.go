package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// lookResult is what a PATH search found.
type lookResult struct {
	path      string // "" when not found
	emptyPATH bool
}

// dirResult is what os.Stat said about a directory.
type dirResult struct {
	missing, notDir bool
}

// execKey reads a key of an exec source (one that isExecKey accepts).
func (l *sourceReader) execKey(s *Source, p pair, kp path) {
	switch p.key {
	case "command":
		s.Command = l.command(p.val, kp)
	case "env":
		s.Env = l.envMap(p.val, kp)
	case "dir":
		if v, ok := l.str(p.val, kp); ok && v != "" {
			s.Dir = l.resolve(v)
			l.checkDir(s.Dir, kp)
		}
	}
}

// checkDir reports a dir that does not exist or is not a directory.
func (l *valueReader) checkDir(dir string, kp path) {
	r, ok := l.dirs[dir]
	if !ok {
		fi, err := os.Stat(dir)
		r = dirResult{missing: err != nil, notDir: err == nil && !fi.IsDir()}
		l.dirs[dir] = r
	}
	if (r.missing || r.notDir) && l.forStore {
		return // only the polls need it (Options.ForStore)
	}
	if r.missing {
		l.addf(kp, "directory %s does not exist", dir)
	} else if r.notDir {
		l.addf(kp, "%s is not a directory", dir)
	}
}

// envMap reads an exec source's env: names without "=" or NUL, values
// without NUL.
func (l *valueReader) envMap(n *yaml.Node, where path) map[string]string {
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

// command reads an exec source's argv and resolves its program (argv[0]).
func (l *valueReader) command(n *yaml.Node, where path) []string {
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
	if argv[0] == "" {
		if d := deref(items[0]); !isNull(items[0]) && d != nil && d.Kind == yaml.ScalarNode {
			l.addf(where.index(0), "must not be empty")
		}
		return argv
	}
	argv[0] = l.program(argv[0], where.index(0))
	return argv
}

// program resolves a command's program: a path (one with a slash) against
// the config directory, which must name an executable; a bare name through
// PATH. Both are cached for the config's other sources. A program that
// cannot be resolved is reported and returned as written.
func (l *valueReader) program(c string, p0 path) string {
	if strings.ContainsRune(c, '/') {
		abs := l.resolve(c)
		err, ok := l.checked[abs]
		if !ok {
			err = checkExecutable(abs)
			l.checked[abs] = err
		}
		if err != "" && !l.forStore { // only the polls need it (Options.ForStore)
			l.addf(p0, "%s: %s", abs, err)
		}
		return abs
	}
	r, ok := l.looked[c]
	if !ok {
		r = l.lookPath(c)
		l.looked[c] = r
	}
	switch {
	case r.path != "":
		return r.path
	case l.forStore: // only the polls need it (Options.ForStore)
	case r.emptyPATH:
		l.addf(p0, "%q not found: PATH is not set", c)
	default:
		l.addf(p0, "%q not found in PATH", c)
	}
	return c
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
func (l *valueReader) lookPath(name string) lookResult {
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
