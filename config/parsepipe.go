package config

import (
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"

	"go.yaml.in/yaml/v3"
)

// batchItems is the number of list items parsed as one YAML document: large
// enough that the parser's set-up is paid rarely, small enough that only a
// few batches' node trees are alive at a time.
const batchItems = 256

// maxParsers bounds the goroutines that parse batches ahead of the loader.
const maxParsers = 4

// parsedItem is one item of the sources list: its node, or (node nil) the
// index in Options.Previous's sources of the source it reuses; hash is its
// text's hash (never 0).
type parsedItem struct {
	node *yaml.Node
	prev int32
	hash uint64
}

// parsePipe parses the batches of the list in order, on up to maxParsers
// goroutines (a fixed pool, at most 2 batches ahead per goroutine), while
// the loader reads the sources of the batches parsed already: the parse,
// most of a load's time, runs on every core, and the node tree of the whole
// list never exists at once.
type parsePipe struct {
	f       *fastRun
	file    string
	workers int
	results []chan []parsedItem // one per batch; nil slice: the batch did not parse
	tokens  chan struct{}       // a slot per batch being parsed or parsed and not read yet
	next    atomic.Int64        // the next batch to parse
	done    chan struct{}
	wg      sync.WaitGroup
	cur     []parsedItem // the batch being read
	curK    int
}

// startParse starts parsing the list of f (messages name file).
func (f *fastRun) startParse(file string) *parsePipe {
	nb := (len(f.list.items) + batchItems - 1) / batchItems
	p := &parsePipe{f: f, file: file, curK: -1, done: make(chan struct{})}
	if nb <= 1 {
		return p // parsed by item, in the caller's goroutine
	}
	p.workers = min(runtime.GOMAXPROCS(0), maxParsers, nb)
	p.results = make([]chan []parsedItem, nb)
	for k := range p.results {
		p.results[k] = make(chan []parsedItem, 1)
	}
	p.tokens = make(chan struct{}, 2*p.workers)
	p.wg.Add(p.workers)
	for range p.workers {
		go p.work()
	}
	return p
}

// work parses batches in order of their index until every batch is taken
// or the pipe stops. A slot is taken before a batch index is, so the batch
// the loader waits for always has one.
func (p *parsePipe) work() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		default:
		}
		select {
		case p.tokens <- struct{}{}:
		case <-p.done:
			return
		}
		k := int(p.next.Add(1)) - 1
		if k >= len(p.results) {
			return
		}
		p.results[k] <- p.f.parseBatch(p.file, k)
	}
}

// stop ends the parsing goroutines and waits for them.
func (p *parsePipe) stop() {
	close(p.done)
	p.wg.Wait()
}

// item returns item i; items are asked for in order. ok is false when its
// batch did not parse.
func (p *parsePipe) item(i int) (parsedItem, bool) {
	if k := i / batchItems; k != p.curK {
		if p.workers == 0 {
			p.cur = p.f.parseBatch(p.file, k)
		} else {
			p.cur = <-p.results[k]
			<-p.tokens
		}
		p.curK = k
	}
	if p.cur == nil {
		return parsedItem{}, false
	}
	return p.cur[i-p.curK*batchItems], true
}

// parseBatch hashes the items of batch k, finds those Options.Previous
// holds unchanged, and parses the others, each run of consecutive ones as
// one document. It returns nil when a run does not parse into as many
// items (an alias to an anchor outside it, a syntax error). Safe for
// concurrent use: it reads f only.
func (f *fastRun) parseBatch(file string, k int) []parsedItem {
	lo, hi := k*batchItems, min((k+1)*batchItems, len(f.list.items))
	out := make([]parsedItem, hi-lo)
	for i := range out {
		sp := f.list.items[lo+i]
		h := maphash.Bytes(f.seed, f.data[sp[0]:sp[1]]) | 1
		out[i] = parsedItem{hash: h, prev: -1}
		if j, ok := f.index[h]; ok {
			out[i].prev = j
		}
	}
	for i := 0; i < len(out); {
		if out[i].prev >= 0 {
			i++
			continue
		}
		j := i
		for j < len(out) && out[j].prev < 0 {
			j++
		}
		nodes, ok := parseItems(file, f.data[f.list.items[lo+i][0]:f.list.items[lo+j-1][1]], j-i)
		if !ok {
			return f.parseWhole(file, out, lo, hi)
		}
		for x := i; x < j; x++ {
			out[x].node = nodes[x-i]
		}
		i = j
	}
	return out
}

// parseWhole parses every item of a batch (lo, hi) as one document, none
// reused: a run of its items that did not parse alone may hold an alias to
// an anchor in an item reused (anchors and aliases make items impure, see
// pureSource, so both are parsed again). nil when the batch does not parse.
func (f *fastRun) parseWhole(file string, out []parsedItem, lo, hi int) []parsedItem {
	nodes, ok := parseItems(file, f.data[f.list.items[lo][0]:f.list.items[hi-1][1]], hi-lo)
	if !ok {
		return nil
	}
	for i := range out {
		out[i].node, out[i].prev = nodes[i], -1
	}
	return out
}

// parseItems parses text, consecutive items of the list, into want nodes.
func parseItems(file string, text []byte, want int) ([]*yaml.Node, bool) {
	root, prob := parseYAML(file, text)
	if prob != nil || root == nil {
		return nil, false
	}
	d := deref(root)
	if d == nil || d.Kind != yaml.SequenceNode || len(d.Content) != want {
		return nil, false
	}
	return d.Content, true
}
