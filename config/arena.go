package config

// sourceArenaChunk is the most sources one allocation of sourceArena holds:
// 256 × 336 B, about 84 KiB.
const sourceArenaChunk = 256

// sourceArena keeps the sources a Load reads in chunks, so that
// Config.Sources can be a slice of pointers (a reload shares the unchanged
// sources of the config before, see Options.Previous) at the cost of one
// allocation per 256 sources of a large load instead of one per source.
//
// The chunks grow from one source to 256, doubling: a chunk lives as long as
// any of its sources is referenced, so a reload that parses one changed
// source must not leave it alone in an 84 KiB chunk (a thousand such
// reloads, each changing another source, would keep 84 MB). What a chunk
// can hold dead is bounded instead by the sources replaced since: a
// replaced source keeps its 336 bytes in a chunk whose other sources are
// still in use.
type sourceArena struct {
	chunk []Source
}

// keep copies s into the arena and returns the copy.
func (a *sourceArena) keep(s *Source) *Source {
	if len(a.chunk) == cap(a.chunk) {
		a.chunk = make([]Source, 0, min(max(2*cap(a.chunk), 1), sourceArenaChunk))
	}
	a.chunk = append(a.chunk, *s)
	return &a.chunk[len(a.chunk)-1]
}
