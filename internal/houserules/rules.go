// Package houserules measures the product code against the house rules of
// the project (DEVELOPERS.md and issue 21): files of at most 500 lines,
// functions of at most 60, no type with behaviour over 20 fields, no type
// over 30 methods, no package-level mutable state (a sentinel error made by
// errors.New or fmt.Errorf, a go:embed file system and a `var _ I = ...`
// check are not state). Its test walks the repository's product files, so
// a change that breaks a rule fails CI with the place named.
package houserules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Limits are the figures a product file is held to.
type Limits struct {
	FileLines        int // lines in one file
	FuncLines        int // lines in one function, signature to closing brace
	BehaviourFields  int // fields of a type with at least BehaviourMethods methods
	BehaviourMethods int
	Methods          int // methods of one type
}

// House is the project's limits.
func House() Limits {
	return Limits{FileLines: 500, FuncLines: 60, BehaviourFields: 20, BehaviourMethods: 3, Methods: 30}
}

// The rules a Violation breaks.
const (
	RuleFile    = "file"    // a file over FileLines
	RuleFunc    = "func"    // a function over FuncLines
	RuleFields  = "fields"  // a type with behaviour over BehaviourFields
	RuleMethods = "methods" // a type over Methods
	RuleVar     = "var"     // a package-level var
)

// Violation is one place over a limit.
type Violation struct {
	Where string // file:line, or the file
	What  string
	Rule  string // one of the Rule constants
	// Name is what breaks the rule, without a line number, so that it
	// stays the same while the code around it moves: the file
	// ("cli/run.go") for RuleFile, else the package folder and the name
	// ("cli.newRunner", "scheduler.Scheduler.finish", "scheduler.Scheduler",
	// "scheduler.AllStates").
	Name string
}

func (v Violation) String() string { return v.Where + ": " + v.What }

// Key names the violation for an allow-list: its rule and its Name
// ("func cli.newRunner").
func (v Violation) Key() string { return v.Rule + " " + v.Name }

type typeInfo struct {
	where   string
	fields  int
	methods int
}

// Check walks root (skipping tests, testdata, vendor and hidden folders) and
// returns every place over lim, sorted.
func Check(root string, lim Limits) ([]Violation, error) {
	var out []Violation
	types := map[string]*typeInfo{} // "dir.Type"
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		rel, _ := filepath.Rel(root, path)
		out = append(out, checkFile(fset, f, rel, lim, types)...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for key, t := range types {
		if t.methods > lim.Methods {
			out = append(out, Violation{t.where, fmt.Sprintf("type %s has %d methods (limit %d)", key, t.methods, lim.Methods), RuleMethods, key})
		}
		if t.methods >= lim.BehaviourMethods && t.fields > lim.BehaviourFields {
			out = append(out, Violation{t.where, fmt.Sprintf("type %s has %d fields and %d methods (limit %d fields with behaviour)", key, t.fields, t.methods, lim.BehaviourFields), RuleFields, key})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func checkFile(fset *token.FileSet, f *ast.File, rel string, lim Limits, types map[string]*typeInfo) []Violation {
	var out []Violation
	dir := filepath.Dir(rel)
	if n := fset.File(f.Pos()).LineCount(); n > lim.FileLines {
		out = append(out, Violation{rel, fmt.Sprintf("%d lines (limit %d)", n, lim.FileLines), RuleFile, filepath.ToSlash(rel)})
	}
	get := func(name string) *typeInfo {
		key := pkgName(dir) + "." + name
		if types[key] == nil {
			types[key] = &typeInfo{}
		}
		return types[key]
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			lines := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
			if d.Doc != nil {
				lines = fset.Position(d.End()).Line - fset.Position(d.Type.Pos()).Line + 1
			}
			if lines > lim.FuncLines {
				out = append(out, Violation{fmt.Sprintf("%s:%d", rel, fset.Position(d.Pos()).Line), fmt.Sprintf("func %s is %d lines (limit %d)", d.Name.Name, lines, lim.FuncLines),
					RuleFunc, funcName(dir, d)})
			}
			if d.Recv != nil && len(d.Recv.List) == 1 {
				if name := recvName(d.Recv.List[0].Type); name != "" {
					get(name).methods++
				}
			}
		case *ast.GenDecl:
			out = append(out, checkGen(fset, d, rel, dir, get)...)
		}
	}
	return out
}

func checkGen(fset *token.FileSet, d *ast.GenDecl, rel, dir string, get func(string) *typeInfo) []Violation {
	var out []Violation
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			t := get(s.Name.Name)
			t.where = fmt.Sprintf("%s:%d", rel, fset.Position(s.Pos()).Line)
			if st, ok := s.Type.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					if len(fl.Names) == 0 {
						t.fields++
					}
					t.fields += len(fl.Names)
				}
			}
		case *ast.ValueSpec:
			if d.Tok != token.VAR || embedded(d, s) || sentinels(s) {
				continue
			}
			for _, n := range s.Names {
				if n.Name == "_" {
					continue
				}
				out = append(out, Violation{fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line), fmt.Sprintf("package-level var %s", n.Name),
					RuleVar, pkgName(dir) + "." + n.Name})
			}
		}
	}
	return out
}

// embedded reports whether s is a var of a //go:embed directive: its
// value is the files built in, not state.
func embedded(d *ast.GenDecl, s *ast.ValueSpec) bool {
	for _, g := range []*ast.CommentGroup{s.Doc, d.Doc} {
		if g == nil {
			continue
		}
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, "//go:embed ") {
				return true
			}
		}
	}
	return false
}

// sentinels reports whether every value of s is a sentinel error, a call
// of errors.New or fmt.Errorf, compared with errors.Is and never changed.
func sentinels(s *ast.ValueSpec) bool {
	if len(s.Values) == 0 || len(s.Values) != len(s.Names) {
		return false
	}
	for i, v := range s.Values {
		if reexport(s.Names[i].Name, v) {
			continue
		}
		call, ok := v.(*ast.CallExpr)
		if !ok {
			return false
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return false
		}
		if !(pkg.Name == "errors" && sel.Sel.Name == "New") && !(pkg.Name == "fmt" && sel.Sel.Name == "Errorf") {
			return false
		}
	}
	return true
}

// reexport reports whether v names another package's sentinel error under
// an Err name (`var ErrX = inner.ErrX`): the same value, given again where
// callers look for it.
func reexport(name string, v ast.Expr) bool {
	sel, ok := v.(*ast.SelectorExpr)
	if !ok || !strings.HasPrefix(name, "Err") || !strings.HasPrefix(sel.Sel.Name, "Err") {
		return false
	}
	_, ok = sel.X.(*ast.Ident)
	return ok
}

// pkgName is the package folder dir with slashes ("internal/waitfor";
// "." for the root).
func pkgName(dir string) string { return filepath.ToSlash(dir) }

// funcName is the Name of a function: "dir.f", or "dir.T.m" for a method.
func funcName(dir string, d *ast.FuncDecl) string {
	if d.Recv != nil && len(d.Recv.List) == 1 {
		if t := recvName(d.Recv.List[0].Type); t != "" {
			return pkgName(dir) + "." + t + "." + d.Name.Name
		}
	}
	return pkgName(dir) + "." + d.Name.Name
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	}
	return ""
}

// AgainstAllowList returns a message for every violation of v whose Key
// allowed does not list, and for every key of allowed that v does not hold
// (a place fixed since: its entry must go, so the list only shrinks),
// sorted.
func AgainstAllowList(v []Violation, allowed map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range v {
		seen[x.Key()] = true
		if _, ok := allowed[x.Key()]; !ok {
			out = append(out, fmt.Sprintf("%s  [%s]: over the house limits", x, x.Key()))
		}
	}
	for key, why := range allowed {
		if !seen[key] {
			out = append(out, fmt.Sprintf("allow-list entry %q (%s) no longer occurs: remove it", key, why))
		}
	}
	sort.Strings(out)
	return out
}
