package config

// resultSpec is the result settings being read (contract section 9): those
// of defaults, then, in each source's copy, the source's own on top.
type resultSpec struct {
	conditional *bool // conditional, nil if not set
	own         path  // the first result key a source sets itself
	hasOwn      bool
}

// resultKey reads a result key shared by defaults and sources
// (conditional) into r; it reports whether key is one of them.
func (l *loader) resultKey(r *resultSpec, p pair, kp path) bool {
	switch p.key {
	case "conditional":
		if v, ok := l.boolean(p.val, kp); ok {
			r.conditional = &v
		}
	default:
		return false
	}
	if kp.src != 0 && !r.hasOwn {
		r.own, r.hasOwn = kp, true
	}
	return true
}

// finishResults completes a source once all its keys are read: an http
// source takes conditional (inherited or its own); on an exec source the
// key is a problem when the source sets it itself (defaults apply to http
// sources only).
func (l *loader) finishResults(s *Source, r *resultSpec) {
	switch s.Type {
	case "http":
		s.Conditional = r.conditional
	case "exec":
		if r.hasOwn {
			l.addf(r.own, "not allowed for type exec")
		}
	}
}
