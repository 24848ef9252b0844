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

// tooLong are functions over maxFuncLines being split right now by someone else; each names who. Remove an entry
// when its function is split; add none.
var tooLong = map[string]string{
	"bot/app.go Run":                                 "h1: the application's wiring, being split by the house move",
	"internal/rule1/rule1.go Check":                  "h1: the Rule 1 check, moved from cmd/bot, moving to the one fold",
	"model/modeltest/anthropic.go ValidateAnthropic": "h3: model/ is being reworked",
}

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

// TestNoLongFilesOrFunctions: no non-test file over maxFileLines lines, no non-test function over maxFuncLines
// (but those in tooLong).
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
			if _, ok := tooLong[rel+" "+fd.Name.Name]; n > maxFuncLines && !ok {
				t.Errorf("%s: %s has %d lines (at most %d): split it", rel, fd.Name.Name, n, maxFuncLines)
			}
		}
	})
	if files < 100 {
		t.Fatalf("found %d source files: too few for a real check", files)
	}
}
