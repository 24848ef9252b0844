// Package core_test holds architecture checks for the core packages.
package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNoPlatformOrStorage fails when any core package depends,
// directly or transitively, on discordgo or bbolt (DESIGN.md §2).
func TestCoreImportsNoPlatformOrStorage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{"github.com/bwmarrin/discordgo", "go.etcd.io/bbolt"}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list returned too few packages to be a real check: %v", deps)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("core depends on %s", d)
			}
		}
	}
}
