package usertext

import (
	"errors"
	"strings"

	"github.com/agentbot/agentbot/internal/redact"
)

// UserFacing is an error whose UserMessage is written for the person who caused it (what was wrong, what to do).
type UserFacing interface{ UserMessage() string }

// GenericFailure is what a person reads for an error not written for them.
const GenericFailure = "⚠️ Something went wrong; the bot logged the details."

// ForChat is the one chat boundary for an error a person's request ended in (a command on any platform): a
// user-facing error's message (secrets redacted), or for any other error (or an empty message) GenericFailure with
// internal true: the caller then logs the wrapped error, once, and nothing of its text reaches the chat.
func ForChat(err error) (text string, internal bool) {
	if msg, internal := Message(err); !internal {
		return "⚠️ " + msg, false
	}
	return GenericFailure, true
}

// Message is ForChat's text without its sign, for a chat text that wears its own ("❌ planner failed: ..."): a
// user-facing error's message (secrets redacted), or for any other error (or an empty message) GenericFailure's
// words with internal true.
func Message(err error) (text string, internal bool) {
	var uf UserFacing
	if errors.As(err, &uf) && strings.TrimSpace(uf.UserMessage()) != "" {
		return redact.String(uf.UserMessage()), false
	}
	return strings.TrimPrefix(GenericFailure, "⚠️ "), true
}
