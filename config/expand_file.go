package config

import (
	"path/filepath"
	"strings"
)

// CredentialsDirectoryEnv is the variable in which systemd passes the
// directory of the credentials of LoadCredential= and SetCredential=.
// A relative ${file:PATH} resolves against it when it is set.
const CredentialsDirectoryEnv = "CREDENTIALS_DIRECTORY"

// maxExpandFile bounds a file read by ${file:PATH} (like a password file).
const maxExpandFile = maxAuthFile

// fileValue is the result of reading one ${file:PATH}, cached per Load.
type fileValue struct {
	v   string
	err error
}

// expandFile returns the value of ${file:name} at p: the contents of the
// file without one trailing newline (\n or \r\n). A relative name resolves
// against $CREDENTIALS_DIRECTORY when it is set, else against the config
// file's directory. ok is false when a problem was recorded; a file that
// cannot be read is a placeholder "" with Options.ForStore (not in the
// keys the store commands use). The contents are never part of a problem.
func (l *decoder) expandFile(name string, p path) (v string, ok bool) {
	if strings.TrimSpace(name) == "" {
		l.addf(p, "${file:} needs a path (write $$ for a literal $)")
		return "", false
	}
	l.reads++ // the value depends on the file (see decoder.reads)
	l.files++
	full := l.credentialPath(name)
	r, cached := l.fileVals[full]
	if !cached {
		r.v, r.err = readExpandFile(full)
		if l.fileVals == nil {
			l.fileVals = map[string]fileValue{}
		}
		l.fileVals[full] = r
	}
	if r.err == nil {
		return r.v, true
	}
	if l.placeholder(p) {
		return "", true
	}
	l.addf(p, "${file:%s}: %v", name, r.err)
	return "", false
}

// credentialPath resolves the PATH of a ${file:PATH}.
func (l *decoder) credentialPath(name string) string {
	if filepath.IsAbs(name) {
		return filepath.Clean(name)
	}
	if dir, ok := l.env(CredentialsDirectoryEnv); ok && dir != "" {
		return resolveIn(l.dir, filepath.Join(dir, name))
	}
	return l.resolve(name)
}

// readExpandFile reads the file of a ${file:PATH}: a regular file of at
// most maxExpandFile bytes, without one trailing newline. Unlike a
// password file it may be empty (as a ${VAR} may be set to "").
func readExpandFile(path string) (string, error) {
	data, err := readLimited(path, maxExpandFile)
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(string(data), "\n")
	return strings.TrimSuffix(s, "\r"), nil
}
