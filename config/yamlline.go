package config

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxRefine is the largest file whose syntax errors refineLine locates: it
// parses about 2*log2(d) prefixes of the file, d lines past the line the
// parser reported.
const maxRefine = 2 << 20

// refineLine returns err with the line where the YAML parser met the
// problem. yaml.v3 reports the line where the enclosing block began (its
// "context mark": "line 3" for a bad indent on line 6 of a list that starts
// on line 3). The line of the problem is the first one whose prefix of the
// file fails with the same message; it lies at or after the line reported,
// and is found by a galloping search from there, then bisection. An error
// without a line, or a file over maxRefine, is returned as it is.
func refineLine(data []byte, err error) error {
	line, msg, ok := yamlLine(err)
	if !ok || len(data) > maxRefine {
		return err
	}
	ends := lineEnds(data) // ends[k-1] is the offset just past line k
	fails := func(k int) bool {
		if k >= len(ends) {
			return true // the whole file: err itself
		}
		_, m, ok := yamlLine(parsePrefix(data[:ends[k-1]]))
		return ok && m == msg
	}
	lo := max(line, 1)
	if lo > len(ends) {
		return err
	}
	// Gallop: the first k = lo-1+2^i that fails bounds the answer.
	ok0, hi := lo-1, lo // fails(ok0) is false (or ok0 is before lo)
	for step := 1; !fails(hi); step *= 2 {
		ok0, hi = hi, min(lo-1+2*step, len(ends))
	}
	for ok0+1 < hi { // the first k in (ok0, hi] that fails
		mid := ok0 + (hi-ok0)/2
		if fails(mid) {
			hi = mid
		} else {
			ok0 = mid
		}
	}
	if hi == line {
		return err
	}
	return errors.New("yaml: line " + strconv.Itoa(hi) + ": " + msg)
}

// yamlLine splits a yaml.v3 error "yaml: line N: MSG" into N and MSG.
func yamlLine(err error) (int, string, bool) {
	if err == nil {
		return 0, "", false
	}
	rest, ok := strings.CutPrefix(err.Error(), "yaml: line ")
	if !ok {
		return 0, "", false
	}
	ls, msg, ok := strings.Cut(rest, ": ")
	if !ok || !isDigits(ls) {
		return 0, "", false
	}
	n, err := strconv.Atoi(ls)
	return n, msg, err == nil
}

// lineEnds returns the offset past each line of data (past its '\n'; the
// last line may have none).
func lineEnds(data []byte) []int {
	ends := make([]int, 0, bytes.Count(data, []byte("\n"))+1)
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			ends = append(ends, len(data))
			break
		}
		off += i + 1
		ends = append(ends, off)
	}
	return ends
}

// parsePrefix parses the documents of data and returns the first error
// (nil when they parse), recovering from a panic of the parser.
func parsePrefix(data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New(parserPanic)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
