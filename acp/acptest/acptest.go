// Package acptest builds the scripted ACP agent (scriptagent) for tests.
package acptest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once sync.Once
	bin  string
	bErr error
	bOut []byte
)

// Build compiles scriptagent once per test binary and returns its path.
func Build(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := exec.Command("mktemp", "-d").Output()
		if err != nil {
			bErr = err
			return
		}
		bin = filepath.Join(string(dir[:len(dir)-1]), "scriptagent")
		cmd := exec.Command("go", "build", "-o", bin, "./scriptagent")
		cmd.Dir = filepath.Dir(file)
		bOut, bErr = cmd.CombinedOutput()
	})
	if bErr != nil {
		t.Fatalf("build scriptagent: %v\n%s", bErr, bOut)
	}
	return bin
}
