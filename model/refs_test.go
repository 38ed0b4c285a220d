package model

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reference is one "file.go: name, name" (or a bare "file.go") the model
// and its README cite as the code a step abstracts.
var reference = regexp.MustCompile(`([\w/]+\.go)(?::\s*([\w.]+(?:,\s*[\w.]+)*))?`)

// Every file and function the model cites still exists, so the model's
// map to the code cannot silently drift (a renamed or moved function
// fails here).
func TestModelReferencesExist(t *testing.T) {
	sources := goFiles(t, "..")
	checked := 0
	for _, doc := range []string{"README.md", "delivery.pml"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range reference.FindAllStringSubmatch(string(b), -1) {
			path, names := m[1], m[2]
			if path == "model_test.go" {
				continue
			}
			files := matching(sources, path)
			if !assert.NotEmpty(t, files, "%s cites %s, which no file is", doc, path) {
				continue
			}
			for _, name := range strings.Split(names, ",") {
				if name = strings.TrimSpace(name); name == "" {
					continue
				}
				assert.True(t, definedIn(t, files, name), "%s cites %s: %s, which %v does not define", doc, path, name, files)
				checked++
			}
		}
	}
	assert.Greater(t, checked, 20, "the references were found")
}

// goFiles lists the module's non-test Go files, relative to root.
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// matching returns the files whose path ends with the cited one.
func matching(files []string, cited string) []string {
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "/"+cited) {
			out = append(out, f)
		}
	}
	return out
}

// definedIn reports whether one of files declares name: a function, a
// type, or, for "recv.name", a method of recv or a function literal or
// method value bound to that name in recv's code.
func definedIn(t *testing.T, files []string, name string) bool {
	t.Helper()
	recv, fn, isMethod := strings.Cut(name, ".")
	var decl *regexp.Regexp
	if isMethod {
		decl = regexp.MustCompile(`func \(\w+ \*?` + regexp.QuoteMeta(recv) + `\) ` + regexp.QuoteMeta(fn) + `\b`)
	} else {
		decl = regexp.MustCompile(`(?m)^(func (\(\w+ \*?\w+\) )?|type |\t)` + regexp.QuoteMeta(recv) + `\b[ (\[]`)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if decl.Match(b) {
			return true
		}
	}
	return false
}
