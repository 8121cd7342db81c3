// Package conditions compiles and evaluates the conditions and the select
// expression of a source (contract section 14): CEL expressions
// (github.com/google/cel-go) over the variables of a poll's result.
//
// A Compiler compiles each expression once per configuration load and
// reuses, by its text, what the previous load compiled (a reload that
// changes no expression compiles nothing); a Set is what one source runs
// after each successful poll (Evaluate).
package conditions

import (
	"fmt"
	"iter"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
)

// Limits of contract 14.4.
const (
	// MaxExprLen is the longest expression, in bytes.
	MaxExprLen = 4 << 10
	// MaxConditions is the most conditions a source may have.
	MaxConditions = 32
	// CostLimit bounds the CEL cost of one evaluation of one expression;
	// beyond it the evaluation stops and the poll fails.
	CostLimit = 100_000
)

// Kind is the kind of source an expression runs on, which decides the
// variables it may read.
type Kind uint8

// The kinds of source.
const (
	HTTP  Kind = iota // an http:// source: status, headers, body, duration, now
	HTTPS             // an https:// source: HTTP's variables and tls
	Exec              // an exec source: exit_code, stdout, duration, now
	nKinds
)

// String names the kind as messages do.
func (k Kind) String() string {
	switch k {
	case HTTP:
		return "http:// source"
	case HTTPS:
		return "https source"
	}
	return "exec source"
}

// The variables an expression may read, by kind (contract 14.1).
const (
	varStatus    = "status"
	varHeaders   = "headers"
	varBodyText  = "body.text"
	varBodyJSON  = "body.json"
	varDuration  = "duration"
	varNow       = "now"
	varNotAfter  = "tls.not_after"
	varIssuer    = "tls.issuer"
	varSubject   = "tls.subject"
	varDNSNames  = "tls.dns_names"
	varExitCode  = "exit_code"
	varStdoutTxt = "stdout.text"
	varStdoutJSN = "stdout.json"
)

// declarations are the variables of kind k.
func declarations(k Kind) []cel.EnvOption {
	vs := []cel.EnvOption{cel.Variable(varDuration, cel.DurationType), cel.Variable(varNow, cel.TimestampType)}
	switch k {
	case Exec:
		return append(vs, cel.Variable(varExitCode, cel.IntType),
			cel.Variable(varStdoutTxt, cel.StringType), cel.Variable(varStdoutJSN, cel.DynType))
	case HTTPS:
		vs = append(vs, cel.Variable(varNotAfter, cel.TimestampType), cel.Variable(varIssuer, cel.StringType),
			cel.Variable(varSubject, cel.StringType), cel.Variable(varDNSNames, cel.ListType(cel.StringType)))
	}
	return append(vs, cel.Variable(varStatus, cel.IntType), cel.Variable(varHeaders, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varBodyText, cel.StringType), cel.Variable(varBodyJSON, cel.DynType))
}

// Problem is an expression that does not compile.
type Problem struct {
	// Index is the condition's index, or -1 for select; -2 for the list
	// itself (too many conditions).
	Index int
	// Column is the 1-based column of the problem in the expression, or 0.
	Column int
	Msg    string
}

// String is "column N: MSG", or MSG without a column.
func (p Problem) String() string {
	if p.Column > 0 {
		return fmt.Sprintf("column %d: %s", p.Column, p.Msg)
	}
	return p.Msg
}

// Compiler compiles expressions for one configuration load. It is not safe
// for concurrent use; the Sets it returns are.
type Compiler struct {
	envs  [nKinds]*cel.Env
	exprs map[exprKey]*compiled
	sets  map[string]*Set
	prev  *Compiler // the previous load's, read only; cut by Seal
}

// exprKey names a compiled expression: its text and the kind it is for.
type exprKey struct {
	kind Kind
	sel  bool
	text string
}

// NewCompiler returns the compiler of a load that follows the one prev
// served (nil for none): what prev compiled is reused by its text.
func NewCompiler(prev *Compiler) *Compiler {
	c := &Compiler{exprs: map[exprKey]*compiled{}, sets: map[string]*Set{}}
	if prev != nil {
		c.envs, c.prev = prev.envs, prev
	}
	return c
}

// Seal ends the load: the compiler forgets the previous one, keeping of
// it what this load used and the Sets still live (those of the sources a
// load took unchanged from the previous config), so that the next load
// compiles none of them again.
func (c *Compiler) Seal(live iter.Seq[*Set]) {
	if c == nil || c.prev == nil {
		return
	}
	keep := map[*Set]bool{}
	if live != nil {
		for s := range live {
			keep[s] = true
		}
	}
	for k, s := range c.prev.sets {
		if _, ok := c.sets[k]; ok || !keep[s] {
			continue
		}
		c.sets[k] = s
		for _, x := range append(s.conds[:len(s.conds):len(s.conds)], s.sel) {
			if x != nil {
				c.exprs[x.key] = x
			}
		}
	}
	c.prev = nil
}

// env returns the environment of kind k, made on first use (cel.NewEnv
// costs about a millisecond: a config without expressions never pays it).
func (c *Compiler) env(k Kind) (*cel.Env, error) {
	if c.envs[k] == nil {
		opts := append(declarations(k), cel.CrossTypeNumericComparisons(true))
		e, err := cel.NewEnv(opts...)
		if err != nil {
			return nil, fmt.Errorf("conditions: %w", err)
		}
		c.envs[k] = e
	}
	return c.envs[k], nil
}

// Compile returns the Set of a source of kind k with the conditions conds
// and the select expression sel ("" for none), or the problems of those
// that do not compile. A source without either has a nil Set.
func (c *Compiler) Compile(k Kind, conds []string, sel string) (*Set, []Problem) {
	if len(conds) == 0 && sel == "" {
		return nil, nil
	}
	key := setKey(k, conds, sel)
	if s := c.set(key); s != nil {
		return s, nil
	}
	var probs []Problem
	if len(conds) > MaxConditions {
		probs = append(probs, Problem{Index: -2, Msg: fmt.Sprintf("%d conditions: at most %d are allowed", len(conds), MaxConditions)})
	}
	s := &Set{conds: make([]*compiled, len(conds))}
	for i, text := range conds {
		x, p := c.expr(exprKey{kind: k, text: text})
		if p != nil {
			p.Index = i
			probs = append(probs, *p)
			continue
		}
		s.conds[i] = x
		s.reads |= x.reads
		s.loops = s.loops || x.loops
	}
	if sel != "" {
		x, p := c.expr(exprKey{kind: k, sel: true, text: sel})
		if p != nil {
			p.Index = -1
			probs = append(probs, *p)
		} else {
			s.sel, s.reads, s.loops = x, s.reads|x.reads, s.loops || x.loops
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	c.sets[key] = s
	return s, nil
}

// setKey is the key of a Set in the cache.
func setKey(k Kind, conds []string, sel string) string {
	var b strings.Builder
	b.WriteByte(byte('0' + k))
	for _, x := range conds {
		b.WriteByte(0)
		b.WriteString(x)
	}
	b.WriteByte(1)
	b.WriteString(sel)
	return b.String()
}

// set returns the cached Set of key (this load's or the previous one's).
func (c *Compiler) set(key string) *Set {
	if s := c.sets[key]; s != nil {
		return s
	}
	if c.prev != nil {
		if s := c.prev.sets[key]; s != nil {
			c.sets[key] = s
			return s
		}
	}
	return nil
}

// expr returns the compiled expression of key, from the cache or compiled
// now.
func (c *Compiler) expr(key exprKey) (*compiled, *Problem) {
	if x := c.exprs[key]; x != nil {
		return x, nil
	}
	if c.prev != nil {
		if x := c.prev.exprs[key]; x != nil {
			c.exprs[key] = x
			return x, nil
		}
	}
	x, p := c.compile(key)
	if p == nil {
		c.exprs[key] = x
	}
	return x, p
}

// compile parses, checks and plans one expression.
func (c *Compiler) compile(key exprKey) (*compiled, *Problem) {
	switch {
	case len(key.text) > MaxExprLen:
		return nil, &Problem{Msg: fmt.Sprintf("expression is %d bytes long: at most %d (4 KiB) are allowed", len(key.text), MaxExprLen)}
	case strings.TrimSpace(key.text) == "":
		return nil, &Problem{Msg: "expression is empty"}
	}
	env, err := c.env(key.kind)
	if err != nil {
		return nil, &Problem{Msg: err.Error()}
	}
	checked, iss := env.Compile(key.text)
	if iss != nil && iss.Err() != nil {
		return nil, issueProblem(key.kind, iss)
	}
	if t := checked.OutputType(); !key.sel && !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, &Problem{Column: 1, Msg: fmt.Sprintf("a condition must be a bool, this is %s", t)}
	}
	prg, err := env.Program(checked, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(64))
	if err != nil {
		return nil, &Problem{Msg: err.Error()}
	}
	x := &compiled{key: key, text: key.text, prg: prg, env: env, checked: checked}
	x.scan(checked.NativeRep())
	if key.sel {
		x.proj = findProjection(checked.NativeRep())
	}
	return x, nil
}

// issueProblem is the first error of iss, with its column, said plainly
// when it is a variable the source's kind never has (14.4).
func issueProblem(k Kind, iss *cel.Issues) *Problem {
	errs := iss.Errors()
	if len(errs) == 0 {
		return &Problem{Msg: iss.Err().Error()}
	}
	e := errs[0]
	p := &Problem{Column: e.Location.Column() + 1, Msg: e.Message}
	if name, ok := undeclared(e.Message); ok {
		if why := never(k, name); why != "" {
			p.Msg = why
		}
	}
	return p
}

// undeclared returns the name of "undeclared reference to 'NAME' ...".
func undeclared(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, "undeclared reference to '")
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "'")
	return name, ok
}

// never says why a source of kind k can never have the variable name, or
// "" when name is no variable of any kind.
func never(k Kind, name string) string {
	root, _, _ := strings.Cut(name, ".")
	switch root {
	case "tls":
		if k == HTTP {
			return "tls is only set for https sources: on an http:// URL this can never hold"
		}
		return "tls is only set for https sources"
	case "stdout", "exit_code":
		return root + " is only set for exec sources"
	case "body", "headers", "status":
		if k == Exec {
			return root + " is only set for http sources (an exec source has stdout and exit_code)"
		}
	}
	return ""
}

// compiled is one compiled expression.
type compiled struct {
	key   exprKey
	text  string
	prg   cel.Program
	reads reads
	// env and checked make fast, the program without cost tracking
	// (costbound.go).
	env     *cel.Env
	checked *cel.Ast
	fast    untracked
	// loops is whether the expression has a comprehension: the only part
	// of an evaluation that cel-go interrupts when its context is done, so
	// that one without runs without a context (eval).
	loops bool
	// proj is the select's native run when it is a projection
	// (project.go), or nil.
	proj *projection
	// probes are the values the expression reads that a failure message
	// names (body.json.status, tls.not_after), in the order they appear.
	probes []probe
}

// reads says which variables of a poll's result a Set reads.
type reads uint8

const (
	readsBody    reads = 1 << iota // body.text, body.json, stdout.text or stdout.json
	readsJSON                      // body.json or stdout.json
	readsHeaders                   // headers
	readsTLS                       // tls.*
	readsText                      // body.text or stdout.text
)

// scan records what the checked expression a reads and the probes of its
// failure messages.
func (x *compiled) scan(a *ast.AST) {
	refs := a.ReferenceMap()
	for _, r := range refs {
		switch r.Name {
		case varBodyText, varStdoutTxt:
			x.reads |= readsBody | readsText
		case varBodyJSON, varStdoutJSN:
			x.reads |= readsBody | readsJSON
		case varHeaders:
			x.reads |= readsHeaders
		case varNotAfter, varIssuer, varSubject, varDNSNames:
			x.reads |= readsTLS
		}
	}
	x.probes = findProbes(a)
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		x.loops = x.loops || e.Kind() == ast.ComprehensionKind
	}))
}
