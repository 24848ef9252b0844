// Package npmtest finds the npm-packaged programs that tests run against (MCP servers, ACP agents written by
// others). `make npm` (run by .ci/run) installs the pinned packages listed in .ci/npm-packages into .cache/npm at
// the repository root; Bin returns a program's path there (or under $AGENTBOT_NPM_DIR when set: a prefix of your
// own, e.g. to try a package before it is in .ci/npm-packages).
//
// Rule: a test that needs such a program fails in CI (the CI environment variable is set) when it is missing, and
// skips elsewhere, saying how to install it. Nothing is fetched at test time.
package npmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentbot/agentbot/internal/reporoot"
)

// Dir is the install prefix relative to the repository root.
const Dir = ".cache/npm"

// Bin returns the absolute path of the npm program name (a file in node_modules/.bin), or fails or skips tb as
// the package rule says.
func Bin(tb testing.TB, name string) string {
	tb.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		missing(tb, "node is not on PATH (Debian package nodejs)")
	}
	root, err := reporoot.Dir()
	if err != nil {
		missing(tb, err.Error())
	}
	dir := filepath.Join(root, Dir)
	if d := os.Getenv("AGENTBOT_NPM_DIR"); d != "" {
		dir = d
	}
	p := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		missing(tb, name+" is not installed under "+Dir+": run `make npm`")
	}
	return p
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("npm test program: %s", why)
	}
	tb.Skipf("npm test program: %s", why)
}
