package arch_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/internal/reporoot"
)

// Limits of a non-test source file and function (issue 28 item 6): past them a reader loses the thread.
const (
	maxFileLines = 700
	maxFuncLines = 100
)

// sources calls fn with every non-test Go file of the module (testdata and hidden directories left out).
func sources(t *testing.T, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root, err := reporoot.Dir()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fn(filepath.ToSlash(rel), fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoLongFilesOrFunctions: no non-test file over maxFileLines lines, no non-test function over maxFuncLines;
// no exceptions.
func TestNoLongFilesOrFunctions(t *testing.T) {
	files := 0
	sources(t, func(rel string, fset *token.FileSet, f *ast.File) {
		files++
		if n := fset.Position(f.FileEnd).Line; n > maxFileLines {
			t.Errorf("%s has %d lines (at most %d): split it along its seams", rel, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines {
				t.Errorf("%s: %s has %d lines (at most %d): split it", rel, fd.Name.Name, n, maxFuncLines)
			}
		}
	})
	if files < 100 {
		t.Fatalf("found %d source files: too few for a real check", files)
	}
}
