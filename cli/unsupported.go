package cli

import (
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/internal/backend"
)

// unsupported returns the problems of a valid config that this build
// cannot run: for now a PostgreSQL store (contract section 8), which the
// config accepts but store.Open refuses until the PostgreSQL backend
// lands. Every command loads its config through flags.load, which reports
// these, so that `validate` says what `run` would refuse. This is the one
// place to change when the backend lands.
func unsupported(cfg *config.Config) config.Problems {
	if backend.IsPostgres(cfg.Store) {
		return config.Problems{{Path: "store", Msg: "PostgreSQL is not supported yet by this build"}}
	}
	return nil
}
