package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIAuditExitCodes: 2 for bad usage, 1 for a conversation no
// transcript holds, 0 when every conversation agrees (none, on an empty
// store).
func TestCLIAuditExitCodes(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("store:\n  path: %q\nhttp:\n  listen: \"\"\n", filepath.Join(dir, "bot.db"))), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"audit", "-config", cfg}, exitUsage, "", "usage: bot audit"},
		{[]string{"audit", "123", "-config", cfg}, exitProblems, "", "no transcript holds a message of this conversation"},
		{[]string{"audit", "all", "-config", cfg}, exitOK, "0 conversation(s) audited", ""},
		{[]string{"audit", "all", "-config", cfg, "-json"}, exitOK, "", ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.errOut) ||
			(tc.out == "" && stdout.Len() > 0) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, %q, %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.out, tc.errOut)
		}
	}
}
