package bot

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentbot/agentbot/store/bolt"
)

// Shared helpers of the tests that run the real bot binary (SIGKILL tests).

// buildBot builds the bot binary into dir and returns its path.
func buildBot(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bot")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/bot").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// runBot starts `bot run -config cfgPath` from bin, its stderr into logs.
func runBot(t *testing.T, bin, cfgPath string, logs *lockedBuffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "run", "-config", cfgPath)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// stopBot stops a bot process gracefully (SIGTERM) and requires a clean exit.
func stopBot(t *testing.T, cmd *exec.Cmd, logs *lockedBuffer) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v\nlogs:\n%s", err, logs.String())
	}
}

// openStopped opens a stopped bot's store, closed at the end of the test.
func openStopped(t *testing.T, path string) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(path, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// seedStore opens the store, lets fill seed it and closes it.
func seedStore(t *testing.T, storePath string, fill func(st *bolt.Store)) {
	t.Helper()
	st, err := bolt.Open(storePath, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fill(st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
