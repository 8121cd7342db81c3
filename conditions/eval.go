package conditions

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// MaxEvalBody is the largest body (or stdout) that body.text and body.json
// read: up to 1 MiB it is in memory already (sources.MaxInMemory), beyond
// that it is read back from the poll's spool file; an expression that reads
// a larger one fails the poll with a clear error instead of holding
// several times its size in memory (the parsed JSON of a body costs some
// five times its bytes).
const MaxEvalBody = 4 << 20

// EvalTimeout bounds the time of one Evaluate, beside the cost limit.
const EvalTimeout = 250 * time.Millisecond

// Body is the kept result of a poll: a sources.Capture.
type Body interface {
	Size() int64
	Reader() *io.SectionReader
}

// inMemory is a Body that may hold its bytes in memory already.
type inMemory interface {
	Bytes() ([]byte, bool)
}

// Input is what one poll observed, the values of the variables.
type Input struct {
	Status   int
	ExitCode int
	Header   http.Header
	Cert     *x509.Certificate // the peer's certificate (https), or nil
	Body     Body              // the body or stdout, or nil
	Duration time.Duration
	Now      time.Time
}

// Outcome is what a Set made of a poll.
type Outcome struct {
	// Err is nil when every condition holds and select succeeded; else it
	// is the poll's error ("condition failed: ...", "select: ...").
	Err error
	// Condition is the expression of the condition that failed, or "".
	Condition string
	// Selected is the canonical JSON of select's value, nil without select.
	Selected []byte
}

// Set is the compiled conditions and select of a source. It is immutable
// and safe for concurrent use.
type Set struct {
	conds []*compiled
	sel   *compiled
	reads reads
	loops bool      // an expression has a comprehension: Evaluate bounds its time
	tapes sync.Pool // of *tape: body.json's, reused by the next poll
}

// NeedsBody reports whether an expression reads the body (or stdout): the
// poller must then keep it for Evaluate.
func (s *Set) NeedsBody() bool { return s != nil && s.reads&readsBody != 0 }

// NeedsHeaders reports whether an expression reads headers.
func (s *Set) NeedsHeaders() bool { return s != nil && s.reads&readsHeaders != 0 }

// NeedsTLS reports whether an expression reads tls.
func (s *Set) NeedsTLS() bool { return s != nil && s.reads&readsTLS != 0 }

// Selects reports whether the Set has a select expression.
func (s *Set) Selects() bool { return s != nil && s.sel != nil }

// Conditions returns the conditions' expressions.
func (s *Set) Conditions() []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s.conds))
	for i, x := range s.conds {
		out[i] = x.text
	}
	return out
}

// Evaluate runs the conditions in order on in, then select: the first
// condition that is false or fails fails the poll, and so does a select
// that fails. The body is parsed as JSON at most once, and only when an
// expression reads body.json.
//
// Each expression runs under CostLimit and, as well, one with a loop is
// interrupted EvalTimeout after Evaluate began (or when ctx is done):
// cel-go v0.31's cost tracker takes a time quadratic in the iterations of
// a comprehension, so that a loop over a large list could run for seconds
// before reaching the cost limit.
func (s *Set) Evaluate(ctx context.Context, in *Input) Outcome {
	vs := s.vars(in)
	defer vs.release()
	for _, x := range s.conds {
		out, err := x.eval(ctx, vs, vs.inputSize(x))
		if err == nil {
			b, ok := out.(types.Bool)
			if ok && bool(b) {
				continue
			}
			if !ok {
				err = fmt.Errorf("the value is %s, not a bool", out.Type().TypeName())
			}
		}
		return Outcome{Err: x.failure(vs, err), Condition: x.text}
	}
	if s.sel == nil {
		return Outcome{}
	}
	n := vs.inputSize(s.sel)
	if p := s.sel.proj; p != nil && ctx.Err() == nil && s.sel.bounded(n) {
		if js, ok := p.run(vs); ok {
			return Outcome{Selected: js}
		}
	}
	return s.sel.selectCEL(ctx, vs, n)
}

// selectCEL evaluates the select x with its CEL program on an input of n
// bytes (vars.inputSize).
func (x *compiled) selectCEL(ctx context.Context, vs *vars, n uint64) Outcome {
	out, err := x.eval(ctx, vs, n)
	if err != nil {
		return Outcome{Err: fmt.Errorf("select: %s", explain(err))}
	}
	js, err := canonicalJSON(out)
	if err != nil {
		return Outcome{Err: fmt.Errorf("select: %w", err)}
	}
	return Outcome{Selected: js}
}

// vars are the variables of one evaluation of s on in, the deadline of
// its looping expressions EvalTimeout from now.
func (s *Set) vars(in *Input) *vars {
	vs := &vars{in: in, tapes: &s.tapes}
	if s.loops {
		vs.deadline = time.Now().Add(EvalTimeout)
	}
	return vs
}

// eval evaluates x on vs, an input of n bytes (vars.inputSize): when x
// loops, under ctx and the evaluation's deadline; else without a context
// (which costs cel-go a child context, a channel and their allocations,
// for nothing to interrupt).
func (x *compiled) eval(ctx context.Context, vs *vars, n uint64) (ref.Val, error) {
	prg := x.program(n)
	if !x.loops {
		out, _, err := prg.Eval(vs)
		return out, err
	}
	if vs.ctx == nil {
		vs.ctx, vs.cancel = context.WithDeadline(ctx, vs.deadline)
	}
	out, _, err := prg.ContextEval(vs.ctx, vs)
	return out, err
}

// failure is the error of the condition x: false (err nil) or failed.
func (x *compiled) failure(vs *vars, err error) error {
	var b strings.Builder
	b.WriteString("condition failed: ")
	b.WriteString(x.text)
	if err != nil {
		b.WriteString(": ")
		b.WriteString(explain(err))
	}
	n := 0
	for _, p := range x.probes {
		v, ok := p.value(vs)
		if !ok {
			continue
		}
		if n == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		n++
		b.WriteString(p.name)
		b.WriteString(" = ")
		b.WriteString(display(v))
	}
	if n > 0 {
		b.WriteByte(')')
	}
	return errors.New(b.String())
}

// explain is an evaluation error as a message says it.
func explain(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "cost limit exceeded"):
		return fmt.Sprintf("evaluation stopped: its cost exceeds the limit of %d", CostLimit)
	case strings.Contains(msg, "operation interrupted"):
		return fmt.Sprintf("evaluation stopped: it ran longer than %v (its cost limit is %d)", EvalTimeout, CostLimit)
	}
	return msg
}

// vars resolves the variables of one evaluation (an
// interpreter.Activation); the body and its JSON are read on first use,
// once for all the Set's expressions.
type vars struct {
	in       *Input
	deadline time.Time // of the expressions with a loop
	// ctx is the context of those, made when the first of them runs
	// through CEL, and cancel its end.
	ctx     context.Context
	cancel  context.CancelFunc
	text    *string
	json    ref.Val
	jsonErr error
	tapes   *sync.Pool // the Set's
	tape    *tape
	parsed  bool
	headers map[string]string
}

var _ interpreter.Activation = (*vars)(nil)

// Parent is nil: vars is the only activation.
func (vs *vars) Parent() interpreter.Activation { return nil }

// ResolveName returns the value of the variable name.
func (vs *vars) ResolveName(name string) (any, bool) {
	in := vs.in
	switch name {
	case varStatus:
		return types.Int(in.Status), true
	case varExitCode:
		return types.Int(in.ExitCode), true
	case varDuration:
		return types.Duration{Duration: in.Duration}, true
	case varNow:
		return types.Timestamp{Time: in.Now}, true
	case varHeaders:
		return vs.headerMap(), true
	case varBodyText, varStdoutTxt:
		t, err := vs.bodyText()
		if err != nil {
			return types.WrapErr(err), true
		}
		return types.String(t), true
	case varBodyJSON, varStdoutJSN:
		v, err := vs.bodyJSON(strings.TrimSuffix(name, ".json"))
		if err != nil {
			return types.WrapErr(err), true
		}
		return v, true
	}
	return vs.cert(name)
}

// cert resolves the tls variables, from the peer's certificate.
func (vs *vars) cert(name string) (any, bool) {
	c := vs.in.Cert
	if c == nil {
		return nil, false
	}
	switch name {
	case varNotAfter:
		return types.Timestamp{Time: c.NotAfter}, true
	case varIssuer:
		return types.String(c.Issuer.String()), true
	case varSubject:
		return types.String(c.Subject.String()), true
	case varDNSNames:
		return c.DNSNames, true
	}
	return nil, false
}

// headerMap is the answer's headers: names lower-cased, values joined by
// ", ".
func (vs *vars) headerMap() map[string]string {
	if vs.headers == nil {
		vs.headers = make(map[string]string, len(vs.in.Header))
		for k, v := range vs.in.Header {
			vs.headers[strings.ToLower(k)] = strings.Join(v, ", ")
		}
	}
	return vs.headers
}

// bodyBytes reads the body: from memory, or from its spool file.
func (vs *vars) bodyBytes() ([]byte, error) {
	b := vs.in.Body
	if b == nil {
		return nil, nil
	}
	if m, ok := b.(inMemory); ok {
		if buf, ok := m.Bytes(); ok {
			return buf, nil
		}
	}
	if n := b.Size(); n > MaxEvalBody {
		return nil, fmt.Errorf("the body is %d bytes: conditions read at most %d (4 MiB)", n, MaxEvalBody)
	}
	buf, err := io.ReadAll(b.Reader())
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	return buf, nil
}

// bodyText is the body as a string.
func (vs *vars) bodyText() (string, error) {
	if vs.text == nil {
		b, err := vs.bodyBytes()
		if err != nil {
			return "", err
		}
		t := string(b)
		vs.text = &t
	}
	return *vs.text, nil
}

// bodyJSON is the body as JSON, checked and indexed on first use (its
// values are decoded as expressions read them, lazyjson.go); what names
// the variable ("body", "stdout") in its error.
func (vs *vars) bodyJSON(what string) (ref.Val, error) {
	if !vs.parsed {
		vs.parsed = true
		b, err := vs.bodyBytes()
		if err == nil {
			vs.tape, _ = vs.tapes.Get().(*tape)
			if vs.tape == nil {
				vs.tape = &tape{}
			}
			if vs.tape.reset(b) != nil {
				err = fmt.Errorf("%s is not JSON", what)
			} else {
				vs.json = jsonValue(vs.tape, 0)
			}
		}
		vs.jsonErr = err
	}
	return vs.json, vs.jsonErr
}

// maxPooledNodes is the largest tape kept for the next poll (1 MiB).
const maxPooledNodes = 1 << 16

// release returns the tape to the Set's pool: nothing of it outlives
// Evaluate (its Outcome holds only strings and bytes).
func (vs *vars) release() {
	if vs.cancel != nil {
		vs.cancel()
	}
	if t := vs.tape; t != nil && cap(t.nodes) <= maxPooledNodes {
		t.b, t.big = nil, nil
		vs.tapes.Put(t)
	}
}

// display writes v for a failure message: strings quoted, composite
// values as JSON, at most 200 bytes.
func display(v ref.Val) string {
	var s string
	switch t := v.(type) {
	case types.String:
		s = fmt.Sprintf("%q", string(t))
	case types.Duration:
		s = t.Duration.String()
	case types.Timestamp:
		s = t.Time.UTC().Format(time.RFC3339)
	default:
		b, err := canonicalJSON(v)
		if err != nil {
			s = fmt.Sprint(v.Value())
		} else {
			s = string(b)
		}
	}
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "..."
	}
	return s
}
