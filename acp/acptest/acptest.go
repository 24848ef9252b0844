// Package acptest builds the scripted ACP agent (scriptagent) and the
// sandbox relay for tests.
package acptest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

type built struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

var programs = map[string]*built{"scriptagent": {}, "relay": {}}

// Build compiles scriptagent once per test binary and returns its path.
func Build(t testing.TB) string { return build(t, "scriptagent") }

// BuildRelay compiles the sandbox relay (acp.RelayMain) once per test binary.
func BuildRelay(t testing.TB) string { return build(t, "relay") }

func build(t testing.TB, name string) string {
	t.Helper()
	b := programs[name]
	b.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := exec.Command("mktemp", "-d").Output()
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(string(dir[:len(dir)-1]), name)
		cmd := exec.Command("go", "build", "-o", b.bin, "./"+name)
		cmd.Dir = filepath.Dir(file)
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build %s: %v\n%s", name, b.err, b.out)
	}
	return b.bin
}
