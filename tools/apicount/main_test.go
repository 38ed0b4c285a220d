package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCountFile(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want count
	}{
		{"unexported only", "package p\nconst a = 1\nfunc f() {}\ntype t struct{ A int }\nfunc (t) M() {}", count{}},
		{"top level", "package p\nconst A, b = 1, 2\nvar V int\nfunc F() {}\ntype T int", count{identifiers: 4}},
		{"methods of exported types only", "package p\ntype T struct{}\nfunc (T) M() {}\nfunc (*T) N() {}\nfunc (*T) n() {}\ntype u struct{}\nfunc (u) M() {}", count{identifiers: 3}},
		{"generic receiver", "package p\ntype G[K any] struct{}\nfunc (G[K]) M() {}", count{identifiers: 2}},
		{"fields and interface methods", "package p\ntype S struct{ A, B int; c int; Embedded; *Ptr; x.Sel }\ntype I interface{ M(); m() }\ntype s struct{ A int }", count{identifiers: 2, fields: 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "p.go", tt.src, 0)
			require.NoError(t, err)
			var got count
			countFile(f, &got)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCountModuleSkipsTestsMainInternalAndExamples(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	write("go.mod", "module m\n")
	write("a/a.go", "package a\nfunc F() {}")
	write("a/a_test.go", "package a\nfunc TestX() {}")
	write("cmd/main.go", "package main\nfunc F() {}")
	write("internal/i/i.go", "package i\nfunc F() {}")
	write("examples/e/e.go", "package e\nfunc F() {}")
	write("nested/go.mod", "module n\n")
	write("nested/n.go", "package n\nfunc F() {}")
	got, err := countModule(root)
	require.NoError(t, err)
	assert.Equal(t, map[string]count{"a": {identifiers: 1}}, got)
}

// ARCHITECTURE.md's "Size of the API" table is this command's output for
// the module as it is, so the figures a reader sees are never stale.
func TestArchitectureTableIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	counts, err := countModule(root)
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	require.NoError(t, err)
	want := table(counts)
	assert.True(t, strings.Contains(string(doc), want), "ARCHITECTURE.md's API table is stale: run bash scripts/apicount.sh and paste its output:\n%s", want)
}

func TestTable(t *testing.T) {
	got := table(map[string]count{"b": {identifiers: 2, fields: 1}, "a": {identifiers: 1}})
	assert.Equal(t, "| package | exported identifiers | exported fields and interface methods |\n|---|---:|---:|\n"+
		"| `a` | 1 | 0 |\n| `b` | 2 | 1 |\n| **module** | **3** | **1** |\n", got)
}
