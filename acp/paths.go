package acp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
)

// maxComponent bounds a directory name made from an id (file systems
// allow 255 bytes; the record adds ".json" and a temp suffix).
const maxComponent = 120

// safeComponent turns a conversation id (a Discord snowflake, a Matrix
// event or room id, anything a platform or a user may put there) into one
// path component that is never "", ".", "..", and holds no separator or
// NUL (invariant 18). Letters, digits, '_' and '-' stay as they are (a
// Discord id names the same directory as before); every other byte, and a
// leading '.', becomes %XX, so distinct ids get distinct names. An escaped
// name longer than maxComponent is cut and completed with a hash of the id.
func safeComponent(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		case c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	s := b.String()
	if s == "" {
		return "%00empty"
	}
	if len(s) > maxComponent {
		sum := sha256.Sum256([]byte(id))
		s = s[:maxComponent-33] + "~" + hex.EncodeToString(sum[:16])
	}
	return s
}

// beneath joins root and one component made by safeComponent and checks
// that the result is a direct child of root (a second line of defence: a
// name that is not one safe component is refused, never followed).
func beneath(root, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return "", fmt.Errorf("%q is not a single safe path component: %w", name, ErrOutsideWorkspace)
	}
	p := filepath.Join(root, name)
	if filepath.Dir(p) != filepath.Clean(root) {
		return "", fmt.Errorf("%q leaves %s: %w", name, root, ErrOutsideWorkspace)
	}
	return p, nil
}

// sessionDir is the workspace of the session bound to a conversation, one
// safe component under the agent's workspace root.
func sessionDir(ac AgentConfig, conversationID string) (string, error) {
	return beneath(ac.Workspace, safeComponent(conversationID))
}

// homeDir is the agent's HOME for that session, under .agentbot-home.
func homeDir(ac AgentConfig, conversationID string) (string, error) {
	return beneath(filepath.Join(ac.Workspace, ".agentbot-home"), safeComponent(conversationID))
}

// recordPath is the session record's file, under .agentbot-sessions.
func recordPath(ac AgentConfig, conversationID string) (string, error) {
	return beneath(filepath.Join(ac.Workspace, ".agentbot-sessions"), safeComponent(conversationID)+".json")
}
