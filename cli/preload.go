package cli

import (
	"context"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// preload reads the stored states while the config is being loaded: with
// 100,000 sources the two take about as long as each other, and on two
// cores they overlap. It guesses the store from the config's top-level
// "store:" line (config.PeekStore), takes the store's lock, then reads the
// states; the daemon uses what it read only if the loaded config names the
// same store. Anything that fails here is left to the normal path, which
// reports it with its usual context.
type preload struct {
	path string
	done chan struct{}
	// Set by the goroutine before done is closed.
	lock   *store.Lock
	states []domain.SourceState
}

// startPreload starts reading the states of the store that configPath
// names (with the environment lookup, as config.Load), if it names one for
// certain; nil otherwise.
func startPreload(configPath string, lookup func(string) (string, bool)) *preload {
	path, ok := config.PeekStore(configPath, lookup)
	if !ok {
		return nil
	}
	if store.Missing(path) {
		// A first start has nothing to read, and a config that turns out
		// to be invalid must not leave a new store behind.
		return nil
	}
	p := &preload{path: path, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		lock, err := store.AcquireLock(path)
		if err != nil {
			return
		}
		p.lock = lock
		st, err := store.Open(path, store.Options{})
		if err != nil {
			return
		}
		states, err := st.LoadStates(context.Background())
		if cerr := st.Close(); err == nil && cerr == nil {
			p.states = states
		}
	}()
	return p
}

// take waits for the preload and, if it read the store at path, hands over
// its lock (nil if it could not take it) and the states (nil if it could
// not read them). Otherwise it releases what it holds and returns nils.
func (p *preload) take(path string) (*store.Lock, []domain.SourceState) {
	if p == nil {
		return nil, nil
	}
	<-p.done
	lock, states := p.lock, p.states
	p.lock, p.states = nil, nil
	if path != p.path {
		if lock != nil {
			_ = lock.Release() // a lock nobody else saw; its file stays
		}
		return nil, nil
	}
	return lock, states
}

// release gives up the preload (the config did not load): it waits for it
// and releases the lock it may hold.
func (p *preload) release() { p.take("") }
