package arch_test

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// perPlatformParts are the parts of one chat platform the core asks for by conversation; core/platform's table
// holds them, filled once (issue 28: one platform registry, not a map per part).
var perPlatformParts = map[string]bool{
	"delivery.Sender": true, "authz.Directory": true, "session.Threads": true, "session.Typist": true,
	"agentroute.Locator": true, "command.Platform": true, "platform.Platform": true,
}

// TestOnePlatformTable: no non-test file but core/platform's keeps a map of a per-platform part (by platform name):
// each was once its own map in its own package (delivery.Mux, authz.Directories, session.ThreadsByPlatform,
// session.TypistsByPlatform, agentroute's locators), and the defects lived in the copies.
func TestOnePlatformTable(t *testing.T) {
	sources(t, func(rel string, fset *token.FileSet, f *ast.File) {
		if strings.HasPrefix(rel, "core/platform/") {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			m, ok := n.(*ast.MapType)
			if !ok {
				return true
			}
			if sel, ok := m.Value.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && perPlatformParts[x.Name+"."+sel.Sel.Name] {
					t.Errorf("%s:%d: a map of %s.%s: per-platform parts belong in core/platform's table (a field of platform.Platform)",
						rel, fset.Position(m.Pos()).Line, x.Name, sel.Sel.Name)
				}
			}
			return true
		})
	})
}
