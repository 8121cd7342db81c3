// Package houserules measures the product code against the house rules of
// the project (DEVELOPERS.md and issue 21): files of at most 500 lines,
// functions of at most 60, no type with behaviour over 20 fields, no type
// over 30 methods, no package-level mutable state. Its test walks the
// repository's product files, so a change that breaks a rule fails CI with
// the place named.
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

// Violation is one place over a limit.
type Violation struct {
	Where string // file:line or package.Type
	What  string
}

func (v Violation) String() string { return v.Where + ": " + v.What }

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
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
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
			out = append(out, Violation{t.where, fmt.Sprintf("type %s has %d methods (limit %d)", key, t.methods, lim.Methods)})
		}
		if t.methods >= lim.BehaviourMethods && t.fields > lim.BehaviourFields {
			out = append(out, Violation{t.where, fmt.Sprintf("type %s has %d fields and %d methods (limit %d fields with behaviour)", key, t.fields, t.methods, lim.BehaviourFields)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func checkFile(fset *token.FileSet, f *ast.File, rel string, lim Limits, types map[string]*typeInfo) []Violation {
	var out []Violation
	dir := filepath.Dir(rel)
	if n := fset.Position(f.End()).Line; n > lim.FileLines {
		out = append(out, Violation{rel, fmt.Sprintf("%d lines (limit %d)", n, lim.FileLines)})
	}
	get := func(name string) *typeInfo {
		key := dir + "." + name
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
				out = append(out, Violation{fmt.Sprintf("%s:%d", rel, fset.Position(d.Pos()).Line), fmt.Sprintf("func %s is %d lines (limit %d)", d.Name.Name, lines, lim.FuncLines)})
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
			if d.Tok != token.VAR {
				continue
			}
			for _, n := range s.Names {
				if n.Name == "_" {
					continue
				}
				out = append(out, Violation{fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line), fmt.Sprintf("package-level var %s", n.Name)})
			}
		}
	}
	return out
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
