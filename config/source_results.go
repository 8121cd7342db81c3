package config

import "time"

// MinErrorReprobe is the shortest error_reprobe other than 0 (off).
const MinErrorReprobe = time.Second

// resultSpec is the result settings being read (contract sections 9 and
// 10.4): those of defaults, then, in each source's copy, the source's own
// on top.
type resultSpec struct {
	conditional *bool         // conditional, nil if not set
	respect     bool          // respect_cache (contract 13.6)
	reprobe     time.Duration // error_reprobe, 0 = off
	own         path          // the first http-only result key a source sets itself
	hasOwn      bool
}

// resultKey reads a result key shared by defaults and sources
// (conditional, error_reprobe) into r; it reports whether key is one of
// them.
func (l *blockReader) resultKey(r *resultSpec, p pair, kp path) bool {
	switch p.key {
	case "conditional":
		if v, ok := l.boolean(p.val, kp); ok {
			r.conditional = &v
		}
		if kp.src != 0 && !r.hasOwn {
			r.own, r.hasOwn = kp, true
		}
	case "respect_cache":
		if v, ok := l.boolean(p.val, kp); ok {
			r.respect = v
		}
		if kp.src != 0 && !r.hasOwn {
			r.own, r.hasOwn = kp, true
		}
	case "error_reprobe":
		if d, ok := l.duration(p.val, kp); ok {
			if d != 0 && d < MinErrorReprobe {
				l.addf(kp, "must be 0 (off) or at least %v, got %v", MinErrorReprobe, d)
			} else {
				r.reprobe = d
			}
		}
	default:
		return false
	}
	return true
}

// finishResults completes a source once all its keys are read: an http
// source takes conditional (inherited or its own); on an exec source the
// key is a problem when the source sets it itself (defaults apply to http
// sources only).
func (l *blockReader) finishResults(s *Source, r *resultSpec) {
	s.ErrorReprobe = r.reprobe
	switch s.Type {
	case "http":
		s.Conditional = r.conditional
		s.RespectCache = r.respect
	case "exec":
		if r.hasOwn {
			l.addf(r.own, "not allowed for type exec")
		}
	}
}
