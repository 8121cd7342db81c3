package maintenance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// loadCfg loads doc through the config loader.
func loadCfg(t *testing.T, dir, doc string) *config.Config {
	t.Helper()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
