package discord

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
)

const codeUnknownMember = 10007

// permAll is every permission bit (discordgo.PermissionAll lacks newer
// ones, such as Send Messages in Threads).
const permAll = int64(1<<51 - 1)

// guildFacts is what permission computation needs of a guild.
type guildFacts struct {
	id, owner string
	roles     map[string]int64 // role id -> permissions; the guild id is @everyone
}

// basePermissions is a member's guild-wide permissions: the owner has all;
// otherwise @everyone's and the member's roles', Administrator meaning all.
func basePermissions(g guildFacts, userID string, roles []string) int64 {
	if userID == g.owner {
		return permAll
	}
	p := g.roles[g.id]
	for _, r := range roles {
		p |= g.roles[r]
	}
	if p&discordgo.PermissionAdministrator != 0 {
		return permAll
	}
	return p
}

// channelPermissions applies a channel's overwrites to a member's base
// permissions as Discord does: @everyone's overwrite, then the member's
// roles' overwrites (denies and allows combined), then the member's own;
// without View Channel nothing else counts. Owner and Administrator are not
// subject to overwrites.
func channelPermissions(g guildFacts, userID string, roles []string, ows []*discordgo.PermissionOverwrite) int64 {
	p := basePermissions(g, userID, roles)
	if p == permAll {
		return p
	}
	for _, o := range ows {
		if o.Type == discordgo.PermissionOverwriteTypeRole && o.ID == g.id {
			p = p&^o.Deny | o.Allow
		}
	}
	var allow, deny int64
	for _, o := range ows {
		if o.Type == discordgo.PermissionOverwriteTypeRole && o.ID != g.id && slices.Contains(roles, o.ID) {
			allow |= o.Allow
			deny |= o.Deny
		}
	}
	p = p&^deny | allow
	for _, o := range ows {
		if o.Type == discordgo.PermissionOverwriteTypeMember && o.ID == userID {
			p = p&^o.Deny | o.Allow
		}
	}
	if p&discordgo.PermissionViewChannel == 0 {
		return 0
	}
	return p
}

// guild returns the facts of a guild from state, or REST when not cached.
func (c *Client) guild(ctx context.Context, s *discordgo.Session, id string) (guildFacts, error) {
	g := guildFacts{id: id, roles: map[string]int64{}}
	if sg, err := s.State.Guild(id); err == nil {
		s.State.RLock()
		g.owner = sg.OwnerID
		for _, r := range sg.Roles {
			g.roles[r.ID] = r.Permissions
		}
		s.State.RUnlock()
		if len(g.roles) > 0 {
			return g, nil
		}
	}
	var rg *discordgo.Guild
	err := c.retry(ctx, func() error {
		var err error
		rg, err = s.Guild(id, discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		c.countError(err)
		return guildFacts{}, fmt.Errorf("discord: get guild %s: %w", id, err)
	}
	g.owner = rg.OwnerID
	for _, r := range rg.Roles {
		g.roles[r.ID] = r.Permissions
	}
	return g, nil
}

// memberTTL is how long member data from Discord (a REST fetch, or the
// member a message or interaction carried) is trusted. Without the
// privileged GUILD_MEMBERS intent the gateway does not report role
// changes, so older cached members are fetched again.
const memberTTL = 5 * time.Minute

// noteMember caches a member as Discord just reported it (a message's or
// an interaction's member): authority decisions use fresh roles.
func (c *Client) noteMember(s *discordgo.Session, guildID string, m *discordgo.Member, u *discordgo.User) {
	if guildID == "" || m == nil || u == nil {
		return
	}
	mc := *m
	mc.GuildID, mc.User, mc.Roles = guildID, u, slices.Clone(m.Roles)
	if s.State.MemberAdd(&mc) == nil {
		c.members.Store(guildID+"/"+u.ID, c.d.Clock.Now())
		c.nonMembers.Delete(guildID + "/" + u.ID)
	}
}

// fresh reports whether a cached member was reported by Discord within memberTTL.
func (c *Client) fresh(guildID, userID string) bool {
	at, ok := c.members.Load(guildID + "/" + userID)
	return ok && c.d.Clock.Now().Sub(at.(time.Time)) < memberTTL
}

// member returns a guild member's roles (and timeout) from state when
// fresh, else over REST (then caches it); ok is false for a non-member.
func (c *Client) member(ctx context.Context, s *discordgo.Session, guildID, userID string) (*discordgo.Member, bool, error) {
	if m, err := s.State.Member(guildID, userID); err == nil && c.fresh(guildID, userID) {
		s.State.RLock()
		mc := &discordgo.Member{GuildID: guildID, Roles: slices.Clone(m.Roles), CommunicationDisabledUntil: m.CommunicationDisabledUntil}
		s.State.RUnlock()
		return mc, true, nil
	}
	if at, ok := c.nonMembers.Load(guildID + "/" + userID); ok && c.d.Clock.Now().Sub(at.(time.Time)) < memberTTL {
		return nil, false, nil // known not to be a member: no REST call per message (a stranger's DMs)
	}
	var m *discordgo.Member
	err := c.retry(ctx, func() error {
		var err error
		m, err = s.GuildMember(guildID, userID, discordgo.WithContext(ctx))
		if code, _, ok := restCode(err); ok && code == codeUnknownMember {
			return nil
		}
		return err
	})
	if err != nil {
		c.countError(err)
		return nil, false, fmt.Errorf("discord: get member %s of guild %s: %w", userID, guildID, err)
	}
	if m == nil {
		c.nonMembers.Store(guildID+"/"+userID, c.d.Clock.Now())
		return nil, false, nil
	}
	c.nonMembers.Delete(guildID + "/" + userID)
	m.GuildID = guildID
	if m.User != nil && s.State.MemberAdd(m) == nil {
		c.members.Store(guildID+"/"+userID, c.d.Clock.Now())
	}
	return &discordgo.Member{GuildID: guildID, Roles: slices.Clone(m.Roles), CommunicationDisabledUntil: m.CommunicationDisabledUntil}, true, nil
}

// Access implements authz.Directory: what a user and the bot may do in a
// guild channel or thread, by Discord's permission model. A thread uses its
// parent's overwrites; posting there needs Send Messages in Threads (and
// Manage Threads when locked); a private thread is visible to its owner and
// Manage Threads holders only (membership is not tracked: strict); a timed
// out member may only view.
func (c *Client) Access(ctx context.Context, userID string, conv binding.ConversationRef) (acc authz.Access, err error) {
	defer func() {
		if err != nil { // the authority refuses; the cause is logged here
			c.log.Warn().Err(err).Str("user", userID).Str("conversation", conv.ConversationID).Msg("permission lookup failed")
		}
	}()
	s := c.session()
	ch, err := c.channel(ctx, s, conv.ConversationID)
	if err != nil {
		if code, _, ok := restCode(err); ok && (code == codeUnknownChannel || code == codeMissingAccess) {
			return authz.Access{}, nil // unknown, or hidden from the bot: nothing to post into
		}
		c.countError(err)
		return authz.Access{}, fmt.Errorf("discord: get channel %s: %w", conv.ConversationID, err)
	}
	if ch.GuildID == "" || (len(c.guilds) > 0 && !c.guilds[ch.GuildID]) {
		return authz.Access{}, nil
	}
	src := ch
	if ch.IsThread() {
		if src, err = c.channel(ctx, s, ch.ParentID); err != nil {
			c.countError(err)
			return authz.Access{}, fmt.Errorf("discord: get parent %s of thread %s: %w", ch.ParentID, ch.ID, err)
		}
	}
	g, err := c.guild(ctx, s, ch.GuildID)
	if err != nil {
		return authz.Access{}, err
	}
	botID, _ := c.ids()
	out := authz.Access{Exists: true, Name: "#" + ch.Name}
	for _, who := range []struct {
		id         string
		view, send *bool
	}{{userID, &out.UserView, &out.UserSend}, {botID, &out.BotView, &out.BotSend}} {
		m, ok, err := c.member(ctx, s, ch.GuildID, who.id)
		if err != nil {
			return authz.Access{}, err
		}
		if !ok {
			continue
		}
		p := channelPermissions(g, who.id, m.Roles, src.PermissionOverwrites)
		if m.CommunicationDisabledUntil != nil && m.CommunicationDisabledUntil.After(c.d.Clock.Now()) && p != permAll {
			p &= discordgo.PermissionViewChannel | discordgo.PermissionReadMessageHistory
		}
		if ch.Type == discordgo.ChannelTypeGuildPrivateThread && p&discordgo.PermissionManageThreads == 0 && ch.OwnerID != who.id && who.id != botID {
			p = 0
		}
		need := int64(discordgo.PermissionSendMessages)
		if ch.IsThread() {
			need = discordgo.PermissionSendMessagesInThreads
			if ch.ThreadMetadata != nil && ch.ThreadMetadata.Locked {
				need |= discordgo.PermissionManageThreads
			}
		}
		*who.view = p&discordgo.PermissionViewChannel != 0
		*who.send = *who.view && p&need == need
	}
	return out, nil
}

// Member implements authz.Directory: a user's roles in the guild of a
// channel or thread, and whether they hold Manage Server there.
func (c *Client) Member(ctx context.Context, userID string, conv binding.ConversationRef) (mem authz.Member, ok bool, err error) {
	defer func() {
		if err != nil {
			c.log.Warn().Err(err).Str("user", userID).Str("conversation", conv.ConversationID).Msg("member lookup failed")
		}
	}()
	s := c.session()
	if authz.IsDM(conv) {
		return authz.Member{}, false, nil
	}
	ch, err := c.channel(ctx, s, conv.ConversationID)
	if err != nil {
		if code, _, ok := restCode(err); ok && (code == codeUnknownChannel || code == codeMissingAccess) {
			return authz.Member{}, false, nil
		}
		c.countError(err)
		return authz.Member{}, false, fmt.Errorf("discord: get channel %s: %w", conv.ConversationID, err)
	}
	if ch.GuildID == "" || !c.served(ch.GuildID) {
		return authz.Member{}, false, nil
	}
	return c.guildMember(ctx, s, ch.GuildID, userID)
}

func (c *Client) guildMember(ctx context.Context, s *discordgo.Session, guildID, userID string) (authz.Member, bool, error) {
	m, ok, err := c.member(ctx, s, guildID, userID)
	if err != nil || !ok {
		return authz.Member{}, false, err
	}
	g, err := c.guild(ctx, s, guildID)
	if err != nil {
		return authz.Member{}, false, err
	}
	return authz.Member{Roles: m.Roles, ManageGuild: basePermissions(g, userID, m.Roles)&discordgo.PermissionManageGuild != 0}, true, nil
}

// served reports whether the bot serves guildID: discord.guilds lists it,
// or no list is set. A DM ("") is served. A guild not served does not
// exist for the bot: no message, command, click or lookup from it.
func (c *Client) served(guildID string) bool {
	return guildID == "" || len(c.guilds) == 0 || c.guilds[guildID]
}

// sharesGuild reports whether a user is a member of a guild the bot serves
// (the allowlist, or every guild it is in), for discord.access.dm: members.
func (c *Client) sharesGuild(ctx context.Context, userID string) bool {
	s := c.session()
	guilds := c.opt.Guilds
	if len(guilds) == 0 {
		s.State.RLock()
		for _, g := range s.State.Guilds {
			guilds = append(guilds, g.ID)
		}
		s.State.RUnlock()
	}
	for _, g := range guilds {
		if _, ok, err := c.member(ctx, s, g, userID); err == nil && ok {
			return true
		}
	}
	return false
}
