package discordtest

import (
	"slices"

	"github.com/bwmarrin/discordgo"
)

func (e *Emulator) getGateway(*call) reply { return ok(map[string]any{"url": e.GatewayURL()}) }

func (e *Emulator) getGatewayBot(*call) reply {
	l := e.startLim
	return ok(map[string]any{"url": e.GatewayURL(), "shards": e.opts.Shards, "session_start_limit": map[string]any{
		"total": l.Total, "remaining": l.Remaining, "reset_after": l.ResetAfter.Milliseconds(), "max_concurrency": l.MaxConcurrency,
	}})
}

func (e *Emulator) getMe(*call) reply { return ok(e.botUser.wire()) }

func (e *Emulator) getUser(c *call) reply {
	u, found := e.world.users[c.p["user_id"]]
	if !found {
		return errUnknownUser()
	}
	return ok(u.wire())
}

func (e *Emulator) createDM(c *call) reply {
	var b struct {
		RecipientID string `json:"recipient_id"`
	}
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	u, found := e.world.users[b.RecipientID]
	if !found || u.ID == e.botUser.ID {
		return errUnknownUser()
	}
	return ok(e.dmChannelLocked(u).wire(&e.world))
}

// dmChannelLocked returns (creating on first use) the DM channel between the bot and u.
func (e *Emulator) dmChannelLocked(u User) *Channel {
	if id, found := e.world.dms[u.ID]; found {
		return e.world.channels[id]
	}
	ch := &Channel{ID: e.nextIDLocked(), Type: ChannelTypeDM, Recipients: []User{u}}
	e.world.channels[ch.ID] = ch
	e.world.channelOrder = append(e.world.channelOrder, ch.ID)
	e.world.dms[u.ID] = ch.ID
	return ch
}

func (e *Emulator) getGuild(c *call) reply {
	g := e.world.guilds[c.p["guild_id"]]
	if g == nil {
		return errUnknownGuild()
	}
	gc := e.guildCreateLocked(g.ID)
	for _, k := range []string{"channels", "threads", "members", "presences", "voice_states", "joined_at", "member_count", "large"} {
		delete(gc, k)
	}
	return ok(gc)
}

func (e *Emulator) getGuildChannels(c *call) reply {
	if e.world.guilds[c.p["guild_id"]] == nil {
		return errUnknownGuild()
	}
	out := []any{}
	for _, id := range e.world.channelOrder {
		ch := e.world.channels[id]
		if !ch.Deleted && ch.GuildID == c.p["guild_id"] && !ch.IsThread() {
			out = append(out, ch.wire(&e.world))
		}
	}
	return ok(out)
}

func (e *Emulator) getActiveThreads(c *call) reply {
	if e.world.guilds[c.p["guild_id"]] == nil {
		return errUnknownGuild()
	}
	threads, members := []any{}, []any{}
	for _, id := range e.world.channelOrder {
		ch := e.world.channels[id]
		if ch.Deleted || ch.GuildID != c.p["guild_id"] || !ch.IsThread() || ch.Archived {
			continue
		}
		if e.world.botDenied(ch)&discordgo.PermissionViewChannel != 0 {
			continue
		}
		threads = append(threads, ch.wire(&e.world))
		if slices.Contains(ch.Members, e.botUser.ID) {
			members = append(members, e.threadMemberWire(ch))
		}
	}
	return ok(map[string]any{"threads": threads, "members": members, "has_more": false})
}

func (e *Emulator) threadMemberWire(ch *Channel) map[string]any {
	return map[string]any{"id": ch.ID, "user_id": e.botUser.ID, "join_timestamp": e.opts.Now().UTC().Format(tsLayout), "flags": 0}
}
