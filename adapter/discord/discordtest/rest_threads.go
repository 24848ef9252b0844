package discordtest

import (
	"net/http"
	"slices"

	"github.com/bwmarrin/discordgo"
)

type threadBody struct {
	Name                string `json:"name"`
	AutoArchiveDuration int    `json:"auto_archive_duration"`
	Type                int    `json:"type"`
}

func (e *Emulator) threadParent(c *call, private bool) (*Channel, reply) {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return nil, r
	}
	if ch.Type != ChannelTypeText {
		return nil, fail(400, 50024, "Cannot execute action on this channel type")
	}
	need := int64(discordgo.PermissionCreatePublicThreads)
	if private {
		need = discordgo.PermissionCreatePrivateThreads
	}
	if e.world.botDenied(ch)&need != 0 {
		return nil, errMissingPerms()
	}
	return ch, reply{}
}

func (e *Emulator) validateThreadBody(b *threadBody) reply {
	if r := checkName(b.Name, maxThreadNameLength); r.status != 0 {
		return r
	}
	if b.AutoArchiveDuration == 0 {
		b.AutoArchiveDuration = 4320
	}
	if !validArchiveDuration(b.AutoArchiveDuration) {
		return formError("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of (60, 1440, 4320, 10080).")
	}
	return reply{}
}

// newThreadLocked creates a thread owned by ownerID and emits THREAD_CREATE.
func (e *Emulator) newThreadLocked(id string, parent *Channel, name string, typ, dur int, ownerID string) *Channel {
	th := &Channel{
		ID: id, GuildID: parent.GuildID, ParentID: parent.ID, Name: name, Type: typ, OwnerID: ownerID,
		AutoArchiveDuration: dur, ArchiveTimestamp: e.opts.Now(), Members: []string{ownerID},
	}
	e.world.channels[id] = th
	e.world.channelOrder = append(e.world.channelOrder, id)
	w := th.wire(&e.world)
	w["newly_created"] = true
	e.dispatchLocked("THREAD_CREATE", w)
	return th
}

func (e *Emulator) threadStandalone(c *call) reply {
	var b threadBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if b.Type == 0 {
		b.Type = 12 // Discord's default for threads without a message: PRIVATE_THREAD
	}
	if b.Type != ChannelTypePublicThread && b.Type != 12 {
		return formError("type", "BASE_TYPE_CHOICES", "Value must be one of (11, 12).")
	}
	parent, r := e.threadParent(c, b.Type == 12)
	if parent == nil {
		return r
	}
	if r := e.validateThreadBody(&b); r.status != 0 {
		return r
	}
	th := e.newThreadLocked(e.nextIDLocked(), parent, b.Name, b.Type, b.AutoArchiveDuration, e.botUser.ID)
	return reply{status: http.StatusCreated, body: th.wire(&e.world)}
}

func (e *Emulator) threadFromMessage(c *call) reply {
	parent, r := e.threadParent(c, false)
	if parent == nil {
		return r
	}
	m := e.world.msgByID[c.p["message_id"]]
	if m == nil || m.ChannelID != parent.ID {
		return errUnknownMessage()
	}
	if e.world.channels[m.ID] != nil {
		return fail(400, 160004, "A thread has already been created for this message")
	}
	var b threadBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := e.validateThreadBody(&b); r.status != 0 {
		return r
	}
	th := e.newThreadLocked(m.ID, parent, b.Name, ChannelTypePublicThread, b.AutoArchiveDuration, e.botUser.ID)
	return reply{status: http.StatusCreated, body: th.wire(&e.world)}
}

func (e *Emulator) thread(id string) (*Channel, reply) {
	ch, r := e.viewable(id)
	if ch == nil {
		return nil, r
	}
	if !ch.IsThread() {
		return nil, fail(400, 50024, "Cannot execute action on this channel type")
	}
	return ch, reply{}
}

func (e *Emulator) joinThread(c *call) reply {
	th, r := e.thread(c.p["channel_id"])
	if th == nil {
		return r
	}
	if th.Archived {
		return errArchived()
	}
	if !slices.Contains(th.Members, e.botUser.ID) {
		th.Members = append(th.Members, e.botUser.ID)
		d := e.threadMemberWire(th)
		d["guild_id"] = th.GuildID
		e.dispatchLocked("THREAD_MEMBER_UPDATE", d)
	}
	return noContent()
}

func (e *Emulator) leaveThread(c *call) reply {
	th, r := e.thread(c.p["channel_id"])
	if th == nil {
		return r
	}
	if th.Archived {
		return errArchived()
	}
	th.Members = slices.DeleteFunc(th.Members, func(id string) bool { return id == e.botUser.ID })
	return noContent()
}
