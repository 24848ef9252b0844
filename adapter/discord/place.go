package discord

import (
	"github.com/agentbot/agentbot/core/agentroute"
	"github.com/agentbot/agentbot/core/binding"
)

// Place says where a conversation sits (core/agentroute.Locator), from the
// gateway cache only (GUILD_CREATE carries every channel of a served guild;
// threads come with THREAD_CREATE and THREAD_LIST_SYNC): its guild, its
// category (a thread's: its parent channel's), and a thread's parent when
// the ref did not carry it. No REST: routing does no I/O; an uncached
// conversation is matched by its own ids only.
func (c *Client) Place(ref binding.ConversationRef) agentroute.Place {
	s := c.session()
	ch, ok := stateChannel(s, ref.ConversationID)
	if !ok {
		if ref.ParentConversationID == "" {
			return agentroute.Place{}
		}
		if ch, ok = stateChannel(s, ref.ParentConversationID); !ok {
			return agentroute.Place{}
		}
		return agentroute.Place{Server: ch.GuildID, Category: ch.ParentID}
	}
	p := agentroute.Place{Server: ch.GuildID}
	if !ch.IsThread() {
		p.Category = ch.ParentID
		return p
	}
	p.Parent = ch.ParentID
	if parent, ok := stateChannel(s, ch.ParentID); ok {
		p.Category = parent.ParentID
	}
	return p
}
