package config

import (
	"bytes"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pacer-dev/pacer/internal/backend"
)

// PeekStore returns the store path that Load would return for the config
// at path with the environment env (as Load's), found without loading the
// config: only a top-level "store:" line in block style, with a plain or
// quoted value, is recognised; without one, the default store is the
// answer under systemd ($STATE_DIRECTORY set). ok is false when the answer
// is not certain that way (no such line outside systemd, a ${VAR}, a
// PostgreSQL URL, a file that cannot be read). It lets the daemon read its
// stored states while the config, which may hold 100,000 sources, is being
// loaded; the daemon still compares the result with what Load returns.
func PeekStore(path string, env func(string) (string, bool)) (store string, ok bool) {
	env, abs, data, err := configInput(path, env)
	if err != nil {
		return "", false
	}
	var line []byte
	for rest := data; len(rest) > 0; {
		l := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			l, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if bytes.HasPrefix(l, []byte("store:")) {
			if line != nil {
				return "", false // twice: Load rejects it
			}
			line = l
		}
	}
	if line == nil {
		if _, systemd := env(StateDirectoryEnv); systemd {
			return defaultStore(env, filepath.Dir(abs)), true
		}
		return "", false
	}
	var v struct {
		Store *string `yaml:"store"`
	}
	if err := yaml.Unmarshal(line, &v); err != nil || v.Store == nil {
		return "", false
	}
	s := *v.Store
	if strings.TrimSpace(s) == "" || strings.Contains(s, "$") || backend.IsPostgres(s) {
		return "", false
	}
	return resolveIn(filepath.Dir(abs), s), true
}
