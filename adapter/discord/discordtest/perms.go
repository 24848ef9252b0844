package discordtest

import (
	"fmt"
	"slices"

	"github.com/bwmarrin/discordgo"
)

// Role is a guild role. The @everyone role has the guild's id.
type Role struct {
	ID          string
	GuildID     string
	Name        string
	Permissions int64
	Position    int
}

// Overwrite is a channel permission overwrite for a role (Type 0) or a member (Type 1).
type Overwrite struct {
	ID    string
	Type  int
	Allow int64
	Deny  int64
}

// Overwrite types.
const (
	OverwriteRole   = 0
	OverwriteMember = 1
)

// DefaultEveryone is the @everyone permission set Discord gives a new guild's members: view, send,
// read history, threads, reactions, embeds, attachments... - no Administrator, no Manage Server.
const DefaultEveryone = int64(discordgo.PermissionViewChannel | discordgo.PermissionSendMessages |
	discordgo.PermissionReadMessageHistory | discordgo.PermissionAddReactions | discordgo.PermissionEmbedLinks |
	discordgo.PermissionAttachFiles | discordgo.PermissionUseExternalEmojis | discordgo.PermissionCreateInstantInvite |
	discordgo.PermissionChangeNickname | discordgo.PermissionCreatePublicThreads | discordgo.PermissionCreatePrivateThreads |
	discordgo.PermissionSendMessagesInThreads | discordgo.PermissionUseApplicationCommands | discordgo.PermissionVoiceConnect |
	discordgo.PermissionVoiceSpeak)

// everyoneLocked returns a guild's @everyone role, creating it with every permission (the
// emulator's historical default, which keeps the bot and its members unrestricted unless a test
// narrows it with SetRolePermissions).
func (w *world) everyoneLocked(guildID string) *Role {
	for _, r := range w.roles[guildID] {
		if r.ID == guildID {
			return r
		}
	}
	r := &Role{ID: guildID, GuildID: guildID, Name: "@everyone", Permissions: discordgo.PermissionAll}
	w.roles[guildID] = append([]*Role{r}, w.roles[guildID]...)
	return r
}

func (w *world) role(guildID, roleID string) *Role {
	for _, r := range w.roles[guildID] {
		if r.ID == roleID {
			return r
		}
	}
	return nil
}

func (w *world) isMember(guildID, userID string) bool {
	return slices.Contains(w.members[guildID], userID)
}

func (w *world) memberRolesOf(guildID, userID string) []string {
	return append([]string(nil), w.memberRoles[guildID+"/"+userID]...)
}

// permissions computes a user's permissions in a guild channel or thread as Discord does: the
// owner has all; otherwise @everyone's and the member's roles' permissions, Administrator meaning
// all; then the channel's overwrites (a thread uses its parent's) - @everyone, then the member's
// roles (deny then allow, combined), then the member's own; without View Channel nothing else
// counts. A private thread is visible only to its members and to Manage Threads holders. A
// non-member has no permissions. DMs are not guild channels: the result is 0.
func (w *world) permissions(userID string, ch *Channel) int64 {
	if ch == nil || ch.GuildID == "" {
		return 0
	}
	g := w.guilds[ch.GuildID]
	if g == nil || !w.isMember(g.ID, userID) {
		return 0
	}
	perms := w.basePermissions(g.ID, userID)
	if perms == allPerms {
		return allPerms
	}
	roles := w.memberRolesOf(g.ID, userID)
	src := ch
	if ch.IsThread() {
		if p := w.channels[ch.ParentID]; p != nil {
			src = p
		}
	}
	ows := w.overwrites[src.ID]
	for _, o := range ows {
		if o.Type == OverwriteRole && o.ID == g.ID {
			perms = perms&^o.Deny | o.Allow
		}
	}
	var allow, deny int64
	for _, o := range ows {
		if o.Type == OverwriteRole && o.ID != g.ID && slices.Contains(roles, o.ID) {
			allow |= o.Allow
			deny |= o.Deny
		}
	}
	perms = perms&^deny | allow
	for _, o := range ows {
		if o.Type == OverwriteMember && o.ID == userID {
			perms = perms&^o.Deny | o.Allow
		}
	}
	if perms&discordgo.PermissionViewChannel == 0 {
		return 0
	}
	if ch.Type == 12 && perms&discordgo.PermissionManageThreads == 0 && !slices.Contains(ch.Members, userID) && ch.OwnerID != userID {
		return 0
	}
	return perms
}

// basePermissions is a member's guild-wide permissions (no channel overwrites): the owner has
// all; otherwise @everyone's and the member's roles', Administrator meaning all. A non-member has
// none.
func (w *world) basePermissions(guildID, userID string) int64 {
	g := w.guilds[guildID]
	if g == nil || !w.isMember(guildID, userID) {
		return 0
	}
	if g.OwnerID == userID {
		return allPerms
	}
	perms := w.everyoneLocked(guildID).Permissions
	for _, id := range w.memberRolesOf(guildID, userID) {
		if r := w.role(guildID, id); r != nil {
			perms |= r.Permissions
		}
	}
	if perms&discordgo.PermissionAdministrator != 0 {
		return allPerms
	}
	return perms
}

// canPost reports whether a user may post in a channel or thread: View Channel and Send Messages
// (Send Messages in Threads in a thread); a locked thread needs Manage Threads.
func (w *world) canPost(userID string, ch *Channel) bool {
	if ch.Type == ChannelTypeDM {
		return true
	}
	p := w.permissions(userID, ch)
	need := int64(discordgo.PermissionViewChannel | discordgo.PermissionSendMessages)
	if ch.IsThread() {
		need = discordgo.PermissionViewChannel | discordgo.PermissionSendMessagesInThreads
		if ch.Locked {
			need |= discordgo.PermissionManageThreads
		}
	}
	return p&need == need
}

func (o Overwrite) wire() map[string]any {
	return map[string]any{"id": o.ID, "type": o.Type, "allow": itoa(o.Allow), "deny": itoa(o.Deny)}
}

func (r *Role) wire() map[string]any {
	return map[string]any{"id": r.ID, "name": r.Name, "permissions": itoa(r.Permissions), "position": r.Position,
		"color": 0, "hoist": false, "managed": false, "mentionable": false, "flags": 0}
}

func (w *world) rolesWire(guildID string) []any {
	w.everyoneLocked(guildID)
	out := []any{}
	for _, r := range w.roles[guildID] {
		out = append(out, r.wire())
	}
	return out
}

// memberWire is a guild member object (with its user when withUser).
func (e *Emulator) memberWireLocked(guildID, userID string, withUser bool) map[string]any {
	roles := []any{}
	for _, r := range e.world.memberRolesOf(guildID, userID) {
		roles = append(roles, r)
	}
	m := map[string]any{"roles": roles, "joined_at": e.opts.Now().UTC().Format(tsLayout), "deaf": false, "mute": false, "flags": 0}
	if withUser {
		m["user"] = e.world.users[userID].wire()
	}
	return m
}

// ---- seeding roles and overwrites ----

// AddRole creates a guild role with the given permissions, emitting GUILD_ROLE_CREATE.
func (e *Emulator) AddRole(guildID, name string, perms int64) (Role, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.world.guilds[guildID] == nil {
		return Role{}, fmt.Errorf("discordtest: unknown guild %s", guildID)
	}
	e.world.everyoneLocked(guildID)
	r := &Role{ID: e.nextIDLocked(), GuildID: guildID, Name: name, Permissions: perms, Position: len(e.world.roles[guildID])}
	e.world.roles[guildID] = append(e.world.roles[guildID], r)
	e.dispatchLocked("GUILD_ROLE_CREATE", map[string]any{"guild_id": guildID, "role": r.wire()})
	return *r, nil
}

// SetRolePermissions changes a role's permissions (the guild id names @everyone), emitting
// GUILD_ROLE_UPDATE. Use DefaultEveryone for a guild set up as Discord sets up a new one.
func (e *Emulator) SetRolePermissions(guildID, roleID string, perms int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.world.guilds[guildID] == nil {
		return fmt.Errorf("discordtest: unknown guild %s", guildID)
	}
	e.world.everyoneLocked(guildID)
	r := e.world.role(guildID, roleID)
	if r == nil {
		return fmt.Errorf("discordtest: unknown role %s", roleID)
	}
	r.Permissions = perms
	e.dispatchLocked("GUILD_ROLE_UPDATE", map[string]any{"guild_id": guildID, "role": r.wire()})
	return nil
}

// GrantRole gives a member a role, emitting GUILD_MEMBER_UPDATE.
func (e *Emulator) GrantRole(guildID, userID, roleID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.world.isMember(guildID, userID) {
		return fmt.Errorf("discordtest: %s is not a member of %s", userID, guildID)
	}
	if e.world.role(guildID, roleID) == nil || roleID == guildID {
		return fmt.Errorf("discordtest: unknown role %s", roleID)
	}
	k := guildID + "/" + userID
	if !slices.Contains(e.world.memberRoles[k], roleID) {
		e.world.memberRoles[k] = append(e.world.memberRoles[k], roleID)
	}
	m := e.memberWireLocked(guildID, userID, true)
	m["guild_id"] = guildID
	e.dispatchLocked("GUILD_MEMBER_UPDATE", m)
	return nil
}

// SetOverwrite sets (replaces) a channel's overwrite for a role or member id; allow and deny both
// 0 removes it. Threads have no overwrites of their own (they use their parent's). Emits
// CHANNEL_UPDATE.
func (e *Emulator) SetOverwrite(channelID string, o Overwrite) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.world.channel(channelID)
	if ch == nil || ch.GuildID == "" || ch.IsThread() {
		return fmt.Errorf("discordtest: %s is not a guild channel", channelID)
	}
	ows := slices.DeleteFunc(e.world.overwrites[channelID], func(x Overwrite) bool { return x.ID == o.ID })
	if o.Allow != 0 || o.Deny != 0 {
		ows = append(ows, o)
	}
	e.world.overwrites[channelID] = ows
	e.dispatchLocked("CHANNEL_UPDATE", ch.wire(&e.world))
	return nil
}

// Permissions returns what Discord would compute for a user in a channel or thread (0 when they
// cannot view it, or it is not a guild channel).
func (e *Emulator) Permissions(userID, channelID string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.world.permissions(userID, e.world.channel(channelID))
}

// ---- REST ----

func (e *Emulator) getGuildMember(c *call) reply {
	g := e.world.guilds[c.p["guild_id"]]
	if g == nil {
		return errUnknownGuild()
	}
	if !e.world.isMember(g.ID, c.p["user_id"]) {
		return errUnknownMember()
	}
	return ok(e.memberWireLocked(g.ID, c.p["user_id"], true))
}

func (e *Emulator) getGuildRoles(c *call) reply {
	if e.world.guilds[c.p["guild_id"]] == nil {
		return errUnknownGuild()
	}
	return ok(e.world.rolesWire(c.p["guild_id"]))
}
