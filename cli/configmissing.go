package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/pacer-dev/pacer/config"
)

// missingDefault adds to err, the error of loading the config, how to
// name a config when the one read was the default (./config.yaml: neither
// -config nor $PACER_CONFIG given) and it does not exist: a new user's
// first run in the wrong directory.
func (f *flags) missingDefault(env Env, err error) error {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == "config" })
	if v, ok := env.LookupEnv("PACER_CONFIG"); set || (ok && v != "") {
		return err
	}
	if _, serr := os.Stat(*f.config); !errors.Is(serr, fs.ErrNotExist) {
		return err
	}
	hint := "no -config given and $PACER_CONFIG is not set: the default is ./config.yaml; " +
		"name the config with -config FILE or PACER_CONFIG=FILE"
	var ps config.Problems
	if errors.As(err, &ps) && len(ps) == 1 {
		return config.Problems{{Path: ps[0].Path, Msg: ps[0].Msg + " (" + hint + ")"}}
	}
	return fmt.Errorf("%w (%s)", err, hint)
}
