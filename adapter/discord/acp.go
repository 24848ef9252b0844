package discord

import (
	"context"

	"github.com/agentbot/agentbot/core/binding"
)

// ACP is what the adapter needs of the external-agent manager (package
// acp): the permission buttons it posts. /spawn agent:, /focus acp: and
// /stop in a bound thread are the core's commands (core/command.ACP).
type ACP interface {
	Choose(ctx context.Context, customID, userID string, where binding.ConversationRef) string
}
