package main

import (
	"strings"
	"testing"

	"github.com/agentbot/agentbot/acp/acptest"
)

// bot doctor names a missing bwrap (and what to do), and says when an
// agent runs unconfined.
func TestCLIDoctorSandbox(t *testing.T) {
	bin := acptest.Build(t)
	cfg, _ := cliConfig(t, "acp:\n  agents:\n    boxed:\n      command: "+bin+"\n      workspace: "+t.TempDir()+
		"\n    open:\n      command: "+bin+"\n      workspace: "+t.TempDir()+"\n      sandbox: none\n")
	t.Setenv("PATH", t.TempDir()) // no bwrap on it
	code, out, errOut := cliRun(t, "doctor", "-config", cfg)
	if code != 1 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"✘ acp agent boxed: sandbox: bwrap (Debian/Ubuntu package bubblewrap) is not installed", "(or set sandbox: none)",
		"⚠ acp agent open: sandbox: none: it and its commands run unconfined"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}
