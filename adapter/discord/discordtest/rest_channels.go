package discordtest

import (
	"fmt"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// viewable resolves a channel the bot can see: 10003 when unknown, 50001 without VIEW_CHANNEL.
func (e *Emulator) viewable(id string) (*Channel, reply) {
	ch := e.world.channel(id)
	if ch == nil {
		return nil, errUnknownChannel()
	}
	if e.world.botDenied(ch)&discordgo.PermissionViewChannel != 0 {
		return nil, errMissingAccess()
	}
	return ch, reply{}
}

func (e *Emulator) getChannel(c *call) reply {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return r
	}
	return ok(ch.wire(&e.world))
}

func (e *Emulator) typing(c *call) reply {
	if ch, r := e.viewable(c.p["channel_id"]); ch == nil {
		return r
	}
	return noContent()
}

func (e *Emulator) patchChannel(c *call) reply {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return r
	}
	var b struct {
		Name                *string `json:"name"`
		Archived            *bool   `json:"archived"`
		Locked              *bool   `json:"locked"`
		AutoArchiveDuration *int    `json:"auto_archive_duration"`
	}
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	denied := e.world.botDenied(ch)
	if !ch.IsThread() {
		if denied&discordgo.PermissionManageChannels != 0 {
			return errMissingPerms()
		}
		if b.Name != nil {
			if r := checkName(*b.Name, maxThreadNameLength); r.status != 0 {
				return r
			}
			ch.Name = *b.Name
		}
		e.dispatchLocked("CHANNEL_UPDATE", ch.wire(&e.world))
		return ok(ch.wire(&e.world))
	}
	mod := denied&discordgo.PermissionManageThreads == 0
	if b.Locked != nil && !mod || !mod && ch.OwnerID != e.botUser.ID {
		return errMissingPerms()
	}
	unarchiving := b.Archived != nil && !*b.Archived
	if ch.Archived && !unarchiving && b.Archived == nil {
		return errArchived()
	}
	if b.Name != nil {
		if r := checkName(*b.Name, maxThreadNameLength); r.status != 0 {
			return r
		}
		ch.Name = *b.Name
	}
	if b.AutoArchiveDuration != nil {
		if !validArchiveDuration(*b.AutoArchiveDuration) {
			return formError("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of (60, 1440, 4320, 10080).")
		}
		ch.AutoArchiveDuration = *b.AutoArchiveDuration
	}
	if b.Locked != nil {
		ch.Locked = *b.Locked
	}
	if b.Archived != nil && *b.Archived != ch.Archived {
		ch.Archived = *b.Archived
		ch.ArchiveTimestamp = e.opts.Now()
	}
	e.dispatchLocked("THREAD_UPDATE", ch.wire(&e.world))
	return ok(ch.wire(&e.world))
}

func (e *Emulator) deleteChannel(c *call) reply {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return r
	}
	need := int64(discordgo.PermissionManageChannels)
	if ch.IsThread() {
		need = discordgo.PermissionManageThreads
	}
	if ch.Type != ChannelTypeDM && e.world.botDenied(ch)&need != 0 {
		return errMissingPerms()
	}
	wire := ch.wire(&e.world)
	e.deleteChannelLocked(ch)
	return ok(wire)
}

func (e *Emulator) deleteChannelLocked(ch *Channel) {
	ch.Deleted = true
	if ch.IsThread() {
		e.dispatchLocked("THREAD_DELETE", map[string]any{"id": ch.ID, "guild_id": ch.GuildID, "parent_id": ch.ParentID, "type": ch.Type})
		return
	}
	e.dispatchLocked("CHANNEL_DELETE", ch.wire(&e.world))
}

func checkName(name string, max int) reply {
	if n := utf8.RuneCountInString(name); n < 1 || n > max {
		return formError("name", "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", max))
	}
	return reply{}
}

func validArchiveDuration(d int) bool { return d == 60 || d == 1440 || d == 4320 || d == 10080 }
