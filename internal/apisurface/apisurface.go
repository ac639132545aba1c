// Package apisurface counts a package's exported names, so that the figures
// in docs/design/api-surface.md can be reproduced (go test -v
// ./internal/apisurface) and a name added without a reason there is caught.
package apisurface

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Name is one exported name of a package.
type Name struct {
	// Kind is "type", "func", "method", "const", "var" or "field" (a field of
	// an exported struct, or a method of an exported interface).
	Kind string
	// Name is how a user writes it after the package name: "Limiter",
	// "Limiter.Allow" for a method, "Result.Allowed" for a field.
	Name string
}

// Names returns the exported names of the package in dir, read from its
// non-test .go files, sorted by Name.
func Names(dir string) ([]Name, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []Name
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if f.Name.Name == "main" {
			continue
		}
		out = append(out, fileNames(f)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func fileNames(f *ast.File) []Name {
	var out []Name
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				out = append(out, Name{"func", d.Name.Name})
			} else if recv := receiver(d.Recv.List[0].Type); ast.IsExported(recv) {
				out = append(out, Name{"method", recv + "." + d.Name.Name})
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					out = append(out, Name{"type", s.Name.Name})
					out = append(out, members(s.Name.Name, s.Type)...)
				case *ast.ValueSpec:
					kind := "var"
					if d.Tok == token.CONST {
						kind = "const"
					}
					for _, id := range s.Names {
						if id.IsExported() {
							out = append(out, Name{kind, id.Name})
						}
					}
				}
			}
		}
	}
	return out
}

// members is the exported fields of a struct type, or the methods of an
// interface type, named typ.
func members(typ string, t ast.Expr) []Name {
	var list *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var out []Name
	for _, f := range list.List {
		names := f.Names
		if len(names) == 0 { // embedded: the field is named for its type
			if id := ast.NewIdent(receiver(f.Type)); id.Name != "" {
				names = []*ast.Ident{id}
			}
		}
		for _, id := range names {
			if id.IsExported() {
				out = append(out, Name{"field", typ + "." + id.Name})
			}
		}
	}
	return out
}

// receiver is the base type's name of a receiver or embedded type: T for
// T, *T, T[P], pkg.T.
func receiver(t ast.Expr) string {
	switch t := t.(type) {
	case *ast.StarExpr:
		return receiver(t.X)
	case *ast.IndexExpr:
		return receiver(t.X)
	case *ast.IndexListExpr:
		return receiver(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

// Counts is how many names of each Kind.
func Counts(names []Name) map[string]int {
	c := map[string]int{}
	for _, n := range names {
		c[n.Kind]++
	}
	return c
}
