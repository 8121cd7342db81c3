package view

import (
	"fmt"

	"github.com/pacer-dev/pacer/scheduler/policy"
)

// Dep is what DependencyBlock needs to know of a source on a dependency
// path: its shown state, the reason its host blocks it ("" for none) and
// what it depends on itself.
type Dep struct {
	State     string
	HostBlock string
	DependsOn []string
}

// DependencyBlock is why a source that depends on deps is blocked (contract
// 13.4): the first source on its dependency path (what it depends on, and
// what those depend on) that is backoff, open, half-open or error, or that
// its host blocks; "" when none is. look finds a source (false: unknown or
// gone, skipped). self is the source's own name (never followed back).
func DependencyBlock(self string, deps []string, look func(name string) (Dep, bool)) string {
	if len(deps) == 0 {
		return ""
	}
	seen := map[string]bool{self: true}
	stack := append([]string(nil), deps...)
	for len(stack) > 0 {
		name := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[name] {
			continue
		}
		seen[name] = true
		d, ok := look(name)
		if !ok {
			continue
		}
		switch d.State {
		case policy.StateBackoff, policy.StateOpen, policy.StateHalfOpen, policy.StateError:
			return fmt.Sprintf("dependency %s is %s", name, d.State)
		}
		if d.HostBlock != "" {
			return fmt.Sprintf("dependency %s is blocked: %s", name, d.HostBlock)
		}
		stack = append(stack, d.DependsOn...)
	}
	return ""
}
