package matrix_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyThisPackageImportsMautrix fails when core depends on mautrix (directly or transitively) or when a package
// other than adapter/matrix imports it directly: the Matrix adapter is the only mautrix importer, as
// adapter/discord is for discordgo.
func TestOnlyThisPackageImportsMautrix(t *testing.T) {
	root := "../../"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", root+"core/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list returned too few packages to be a real check: %v", deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "maunium.net/go/mautrix") {
			t.Errorf("core depends on %s", d)
		}
	}
	out, err = exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, root+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	importers := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, "maunium.net/go/mautrix") {
				if f[0] != "github.com/agentbot/agentbot/adapter/matrix" {
					t.Errorf("%s imports %s", f[0], imp)
				}
				importers++
			}
		}
	}
	if importers == 0 {
		t.Fatal("no package imports mautrix: the check does not see imports")
	}
}
