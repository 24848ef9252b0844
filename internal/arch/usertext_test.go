package arch_test

import (
	"go/ast"
	"go/token"
	"testing"
)

// oldUserTextMappers are functions that once each turned errors into text for people on their own (issue 28: six
// mappers); core/usertext is the one boundary now (ForChat, Message, ForReader), over errors that word themselves
// (usertext.UserFacing, such as *model.Error).
var oldUserTextMappers = map[string]bool{"UserText": true, "noticeText": true, "FailureText": true, "userFacing": true}

// TestOneUserTextBoundary: no non-test file declares one of the old mappers again.
func TestOneUserTextBoundary(t *testing.T) {
	sources(t, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && oldUserTextMappers[fd.Name.Name] {
				t.Errorf("%s:%d: %s maps errors to text for people: go through core/usertext (ForChat for a chat, ForReader for the model), with the wording on the error (UserMessage)",
					rel, fset.Position(fd.Pos()).Line, fd.Name.Name)
			}
		}
	})
}
