package acp

import (
	"path/filepath"
	"strings"
	"testing"
)

// Hostile conversation ids (a Matrix "thread root" is the sender's text)
// become one safe component, distinct ids stay distinct, and the result
// is a direct child of the root (invariant 18).
func TestSafeComponentHostileIDs(t *testing.T) {
	ids := []string{
		"$/../../x", "..", ".", "", "../x", "a/b", "a\\b", "x\x00y", "/etc/passwd", "$abc:server.org",
		".hidden", "%2F", "%252F", "123456789012345678", strings.Repeat("é/", 200), strings.Repeat("a", 300),
		strings.Repeat("a", 299) + "b",
	}
	root := filepath.Join(t.TempDir(), "ws")
	seen := map[string]string{}
	for _, id := range ids {
		c := safeComponent(id)
		if c == "" || c == "." || c == ".." || strings.ContainsAny(c, "/\\\x00") || strings.HasPrefix(c, ".") || len(c) > maxComponent {
			t.Errorf("safeComponent(%q) = %q: not one safe component", id, c)
		}
		if prev, ok := seen[c]; ok {
			t.Errorf("safeComponent(%q) = safeComponent(%q) = %q", id, prev, c)
		}
		seen[c] = id
		p, err := sessionDir(AgentConfig{Workspace: root}, id)
		if err != nil {
			t.Errorf("sessionDir(%q): %v", id, err)
			continue
		}
		if filepath.Dir(p) != root {
			t.Errorf("sessionDir(%q) = %s, not directly under %s", id, p, root)
		}
		if r, err := recordPath(AgentConfig{Workspace: root}, id); err != nil || filepath.Dir(r) != filepath.Join(root, ".agentbot-sessions") {
			t.Errorf("recordPath(%q) = %s, %v", id, r, err)
		}
	}
	if got := safeComponent("123456789012345678"); got != "123456789012345678" {
		t.Errorf("a Discord id is escaped: %q (its workspace would move)", got)
	}
	for _, bad := range []string{"..", ".", "", "a/b", "x\x00", `a\b`} {
		if _, err := beneath(root, bad); err == nil {
			t.Errorf("beneath(%q) accepted", bad)
		}
	}
}

func FuzzSafeComponent(f *testing.F) {
	for _, s := range []string{"$/../../x", "..", "a/b", "123"} {
		f.Add(s)
	}
	root := "/ws"
	f.Fuzz(func(t *testing.T, id string) {
		c := safeComponent(id)
		p, err := beneath(root, c)
		if err != nil || filepath.Dir(p) != root || len(c) > maxComponent {
			t.Fatalf("safeComponent(%q) = %q: %s %v", id, c, p, err)
		}
	})
}
