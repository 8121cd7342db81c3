package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testPATH = "/usr/local/bin:/usr/bin:/bin"

// envMap returns an env lookup over m; PATH defaults to testPATH.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := m[k]; ok {
			return v, true
		}
		if k == "PATH" {
			return testPATH, true
		}
		return "", false
	}
}

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadIn writes yaml to dir/config.yaml and loads it.
func loadIn(t *testing.T, dir, yaml string, env map[string]string) (*Config, Problems) {
	t.Helper()
	p := writeFile(t, dir, "config.yaml", yaml, 0o644)
	cfg, err := Load(p, envMap(env))
	return checkResult(t, cfg, err)
}

func checkResult(t *testing.T, cfg *Config, err error) (*Config, Problems) {
	t.Helper()
	if err == nil {
		if cfg == nil {
			t.Fatal("Load returned nil config and nil error")
		}
		return cfg, nil
	}
	if cfg != nil {
		t.Fatalf("Load returned a config together with error %v", err)
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %T is not Problems: %v", err, err)
	}
	if len(ps) == 0 {
		t.Fatal("Load returned empty Problems")
	}
	return nil, ps
}

func mustLoad(t *testing.T, yaml string, env map[string]string) *Config {
	t.Helper()
	cfg, ps := loadIn(t, t.TempDir(), yaml, env)
	if ps != nil {
		t.Fatalf("unexpected problems:\n%v", ps)
	}
	return cfg
}

func mustFail(t *testing.T, yaml string, env map[string]string) Problems {
	t.Helper()
	_, ps := loadIn(t, t.TempDir(), yaml, env)
	if ps == nil {
		t.Fatalf("config loaded, want problems:\n%s", yaml)
	}
	return ps
}

func hasPrefix(ps Problems, prefix string) bool {
	for _, p := range ps {
		if strings.HasPrefix(p.String(), prefix) {
			return true
		}
	}
	return false
}

func mustSource(t *testing.T, c *Config, name string) *Source {
	t.Helper()
	s, ok := c.Source(name)
	if !ok {
		t.Fatalf("source %q not found", name)
	}
	return s
}
