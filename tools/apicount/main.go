// Command apicount counts the exported identifiers of the module's
// packages (test files, examples and internal packages excluded): the
// exported constants, variables, types, functions and methods of exported
// types, and, apart, the exported fields of exported structs and the
// methods of exported interfaces. It prints the Markdown table of
// ARCHITECTURE.md's "Size of the API".
//
//	go run ./tools/apicount [module root]
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// count is what one package exports.
type count struct {
	identifiers int // constants, variables, types, functions, methods
	fields      int // struct fields and interface methods
}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	counts, err := countModule(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicount:", err)
		os.Exit(1)
	}
	fmt.Print(table(counts))
}

// table renders counts as ARCHITECTURE.md's Markdown table, packages sorted,
// the module's total last.
func table(counts map[string]count) string {
	var b strings.Builder
	b.WriteString("| package | exported identifiers | exported fields and interface methods |\n")
	b.WriteString("|---|---:|---:|\n")
	var total count
	for _, pkg := range slices.Sorted(maps.Keys(counts)) {
		c := counts[pkg]
		total.identifiers += c.identifiers
		total.fields += c.fields
		fmt.Fprintf(&b, "| `%s` | %d | %d |\n", pkg, c.identifiers, c.fields)
	}
	fmt.Fprintf(&b, "| **module** | **%d** | **%d** |\n", total.identifiers, total.fields)
	return b.String()
}

// countModule counts every public package under root, keyed by its path
// relative to root.
func countModule(root string) (map[string]count, error) {
	out := map[string]count{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		name := d.Name()
		if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "internal" || name == "examples") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
			return filepath.SkipDir // a nested module
		}
		c, ok, err := countPackage(path)
		if err != nil {
			return err
		}
		if ok {
			out[filepath.ToSlash(rel)] = c
		}
		return nil
	})
	return out, err
}

// countPackage counts the non-test Go files of one directory; ok is false
// when it holds none, or only a main package.
func countPackage(dir string) (c count, ok bool, err error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return c, false, err
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return c, false, err
		}
		if f.Name.Name == "main" {
			return count{}, false, nil
		}
		ok = true
		countFile(f, &c)
	}
	return c, ok, nil
}

func countFile(f *ast.File, c *count) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv != nil && !exportedReceiver(d.Recv) {
				continue
			}
			c.identifiers++
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							c.identifiers++
						}
					}
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					c.identifiers++
					c.fields += exportedMembers(s.Type)
				}
			}
		}
	}
}

// exportedReceiver reports whether a method's receiver type is exported.
func exportedReceiver(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// exportedMembers counts the exported fields of a struct type and the
// exported methods of an interface type.
func exportedMembers(t ast.Expr) int {
	var list *ast.FieldList
	switch x := t.(type) {
	case *ast.StructType:
		list = x.Fields
	case *ast.InterfaceType:
		list = x.Methods
	default:
		return 0
	}
	n := 0
	for _, f := range list.List {
		if len(f.Names) == 0 {
			// An embedded type: exported when its name is.
			if id := embeddedName(f.Type); id != nil && id.IsExported() {
				n++
			}
			continue
		}
		for _, name := range f.Names {
			if name.IsExported() {
				n++
			}
		}
	}
	return n
}

func embeddedName(t ast.Expr) *ast.Ident {
	switch x := t.(type) {
	case *ast.StarExpr:
		return embeddedName(x.X)
	case *ast.SelectorExpr:
		return x.Sel
	case *ast.Ident:
		return x
	}
	return nil
}
