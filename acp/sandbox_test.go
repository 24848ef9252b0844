package acp_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/acp/acptest"
)

// sandbox returns the real bwrap sandbox, or skips when bwrap is missing
// or cannot create namespaces here (a container without user namespaces).
func sandbox(t *testing.T) *acp.Sandbox {
	t.Helper()
	sb, err := acp.FindSandbox(false)
	if err != nil {
		t.Skipf("bwrap not installed (Debian package bubblewrap): %v", err)
	}
	if err := sb.Check(); err != nil {
		t.Skip(err)
	}
	return sb
}

// runIn runs sh -c script in the sandbox, the workspace ws.
func runIn(t *testing.T, sb *acp.Sandbox, ws, script string) (string, error) {
	t.Helper()
	argv := sb.Wrap([]string{"sh", "-c", script}, acp.SandboxPaths{Workspace: ws}, 0)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The sandbox: workspace read-write, the system read-only, a private
// /tmp, hidden paths empty, its own PID namespace, no network unless
// network: true, and the file size limit.
func TestSandboxConfines(t *testing.T) {
	sb := sandbox(t)
	ws := t.TempDir()
	here, _ := os.Getwd()
	outside, err := os.MkdirTemp(here, "sandbox-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	hidden := t.TempDir()
	if err := os.WriteFile(filepath.Join(hidden, "bot.db"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb.Hide = []string{hidden}
	sb.Limits.FileSize = 1 << 20

	if out, err := runIn(t, sb, ws, "echo hi > in-ws && cat in-ws"); err != nil || out != "hi\n" {
		t.Errorf("workspace write: %v %q", err, out)
	}
	if out, err := runIn(t, sb, ws, "touch "+outside+"/escaped"); err == nil || !strings.Contains(out, "Read-only") {
		t.Errorf("write outside the workspace: %v %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("a file was written outside the workspace")
	}
	name := filepath.Join(os.TempDir(), "agentbot-sandbox-probe-"+filepath.Base(ws))
	if out, err := runIn(t, sb, ws, "echo x > "+name+" && cat "+name); err != nil || out != "x\n" {
		t.Errorf("private /tmp: %v %q", err, out)
	}
	if _, err := os.Stat(name); err == nil {
		os.Remove(name)
		t.Error("the sandbox's /tmp is the host's")
	}
	if out, _ := runIn(t, sb, ws, "cat "+hidden+"/bot.db; ls -A "+hidden+" | wc -l"); strings.Contains(out, "secret") || !strings.HasSuffix(out, "0\n") {
		t.Errorf("hidden directory shows %q", out)
	}
	if out, _ := runIn(t, sb, ws, "ls /proc | grep -c '^[0-9]'"); func() bool { n, err := strconv.Atoi(strings.TrimSpace(out)); return err != nil || n > 5 }() {
		t.Errorf("PID namespace shows %s processes", out)
	}
	if out, err := runIn(t, sb, ws, "head -c 2000000 /dev/zero > big"); err == nil {
		t.Errorf("a 2 MB file past the 1 MB limit was written: %q", out)
	}

	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the network check needs a client")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := py + ` -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5); print("connected")' ` + strconv.Itoa(port)
	if out, err := runIn(t, sb, ws, connect); err == nil || strings.Contains(out, "connected") {
		t.Errorf("a network connect from the sandbox succeeded: %q", out)
	}
	sb.Network = true
	if out, err := runIn(t, sb, ws, connect); err != nil || !strings.Contains(out, "connected") {
		t.Errorf("network: true, connect failed: %v %q", err, out)
	}
}

// An agent in the sandbox: its commands run there too (a write outside
// the workspace fails), and it still runs (its program exposed).
func TestSandboxedAgentAndCommands(t *testing.T) {
	sb := sandbox(t)
	here, _ := os.Getwd()
	outside, err := os.MkdirTemp(here, "sandbox-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	f := newFixture(t, func(ac *acp.AgentConfig) {
		sb.Expose = []string{filepath.Dir(ac.Command)}
		ac.Terminal, ac.Commands = true, acp.CommandOptions{Sandbox: sb}
	})
	res := f.spawn()
	f.say(res, "alice", "write notes.txt hello\nrun cat notes.txt; touch "+outside+"/escaped || echo refused-outside; echo $$")
	m := f.waitShown("ran exit=0")
	if !strings.Contains(m.text, "hello") || !strings.Contains(m.text, "refused-outside") {
		t.Errorf("agent saw %q", m.text)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("a command wrote outside the workspace")
	}
}

// With the relay, a sandboxed agent has no network but its model
// endpoint: a connection to the endpoint its env names goes through the
// bot's endpoint proxy; any other (here a second loopback listener) is
// refused; without the proxy it cannot connect at all.
func TestSandboxedAgentReachesOnlyItsEndpoint(t *testing.T) {
	sb := sandbox(t)
	listen := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return ln.Addr().String()
	}
	endpoint, other := listen(), listen()
	relay := acptest.BuildRelay(t)
	f := newFixture(t, func(ac *acp.AgentConfig) {
		sb.Relay = []string{relay}
		sb.Expose = []string{filepath.Dir(ac.Command), relay}
		ac.Env["MODEL_BASE_URL"] = "http://" + endpoint
		ac.Commands = acp.CommandOptions{Sandbox: sb}
	})
	res := f.spawn()
	f.say(res, "alice", "connect "+endpoint)
	f.waitShown("connect ok")
	f.say(res, "alice", "connect "+other)
	f.waitShown("connect failed: proxy: 403 Forbidden")
	f.say(res, "alice", "dial "+endpoint)
	f.waitShown("dial failed")
	f.say(res, "alice", "env HTTPS_PROXY")
	f.waitShown("env HTTPS_PROXY=http://" + acp.RelayListen)
}
