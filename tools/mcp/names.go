package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Separator joins a server's name and its tool's name.
const Separator = "__"

// maxName is the providers' tool name limit (OpenAI and Anthropic:
// ^[a-zA-Z0-9_-]{1,64}$).
const maxName = 64

// ValidName reports whether s is a tool name every provider accepts.
func ValidName(s string) bool {
	if s == "" || len(s) > maxName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// qualify is the model-facing name of server's tool: <server>__<tool>, with
// characters outside the rule replaced by '_' and, when that changed the
// name or it is too long, a short hash of the original appended, so two
// tools never share a name.
func qualify(server, tool string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(tool); i++ {
		if c := tool[i]; nameByte(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
			changed = true
		}
	}
	name := server + Separator + b.String()
	if !changed && len(name) <= maxName && tool != "" {
		return name
	}
	sum := sha256.Sum256([]byte(tool))
	suffix := "_" + hex.EncodeToString(sum[:])[:8]
	if len(name)+len(suffix) > maxName {
		name = name[:maxName-len(suffix)]
	}
	return name + suffix
}
