package npmtest

import (
	_ "embed"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

//go:embed netguard.cjs
var netguard []byte

// NetGuard returns the environment that keeps a Node program on loopback (NODE_OPTIONS with the netguard
// preload, NETGUARD_LOG) and a function returning what the program tried to reach outside: one
// "lookup <host>" or "connect <host:port>" per attempt, each of which failed.
// Its files are in dir (a directory the program can see: under a sandboxed agent's HOME, as the
// sandbox's /tmp is its own).
func NetGuard(tb testing.TB, dir string) (env map[string]string, attempts func() []string) {
	tb.Helper()
	js := filepath.Join(dir, "netguard.cjs")
	if err := os.WriteFile(js, netguard, 0o600); err != nil {
		tb.Fatal(err)
	}
	log := filepath.Join(dir, "netguard.log")
	env = map[string]string{"NODE_OPTIONS": "--require " + js, "NETGUARD_LOG": log}
	return env, func() []string {
		b, err := os.ReadFile(log)
		if err != nil {
			return nil
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
		return out
	}
}
