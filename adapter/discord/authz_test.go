package discord

import (
	"context"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
)

// channelPermissions follows Discord's documented algorithm.
func TestChannelPermissions(t *testing.T) {
	t.Parallel()
	const (
		view = discordgo.PermissionViewChannel
		send = discordgo.PermissionSendMessages
	)
	g := guildFacts{id: "g", owner: "own", roles: map[string]int64{"g": view | send, "ra": 0, "rb": 0, "adm": discordgo.PermissionAdministrator}}
	ow := func(id string, typ discordgo.PermissionOverwriteType, allow, deny int64) *discordgo.PermissionOverwrite {
		return &discordgo.PermissionOverwrite{ID: id, Type: typ, Allow: allow, Deny: deny}
	}
	role, member := discordgo.PermissionOverwriteTypeRole, discordgo.PermissionOverwriteTypeMember
	tests := []struct {
		name  string
		user  string
		roles []string
		ows   []*discordgo.PermissionOverwrite
		want  int64
	}{
		{"@everyone only", "u", nil, nil, view | send},
		{"@everyone overwrite denies view", "u", nil, []*discordgo.PermissionOverwrite{ow("g", role, 0, view)}, 0},
		{"a role overwrite gives it back", "u", []string{"ra"}, []*discordgo.PermissionOverwrite{ow("g", role, 0, view), ow("ra", role, view, 0)}, view | send},
		{"role allow beats role deny (combined)", "u", []string{"ra", "rb"}, []*discordgo.PermissionOverwrite{ow("ra", role, send, 0), ow("rb", role, 0, send)}, view | send},
		{"member overwrite beats roles", "u", []string{"ra"}, []*discordgo.PermissionOverwrite{ow("ra", role, send, 0), ow("u", member, 0, send)}, view},
		{"another member's overwrite does not apply", "u", nil, []*discordgo.PermissionOverwrite{ow("v", member, 0, view)}, view | send},
		{"no view means nothing", "u", nil, []*discordgo.PermissionOverwrite{ow("g", role, 0, view)}, 0},
		{"administrator ignores overwrites", "a", []string{"adm"}, []*discordgo.PermissionOverwrite{ow("g", role, 0, view), ow("a", member, 0, view)}, permAll},
		{"owner ignores overwrites", "own", nil, []*discordgo.PermissionOverwrite{ow("own", member, 0, view)}, permAll},
	}
	for _, tc := range tests {
		if got := channelPermissions(g, tc.user, tc.roles, tc.ows); got != tc.want {
			t.Errorf("%s: permissions = %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// The adapter's Access computes from gateway state (and REST when a member
// is not cached) what the emulator - which models Discord strictly -
// computes, for the bot and members with roles, overwrites, threads under a
// hidden parent and a locked thread.
func TestAccessMatchesEmulator(t *testing.T) {
	t.Parallel()
	e := discordtest.New(discordtest.Options{})
	g := e.AddGuild("perm")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.SetRolePermissions(g.ID, g.ID, discordtest.DefaultEveryone))
	insiders, err := e.AddRole(g.ID, "insiders", 0)
	must(err)
	threadMods, err := e.AddRole(g.ID, "thread-mods", discordgo.PermissionManageThreads)
	must(err)
	admins, err := e.AddRole(g.ID, "admins", discordgo.PermissionAdministrator)
	must(err)
	plain, err := e.AddMember(g.ID, "plain")
	must(err)
	insider, err := e.AddMember(g.ID, "insider")
	must(err)
	must(e.GrantRole(g.ID, insider.ID, insiders.ID))
	mod, err := e.AddMember(g.ID, "mod")
	must(err)
	must(e.GrantRole(g.ID, mod.ID, threadMods.ID))
	admin, err := e.AddMember(g.ID, "admin")
	must(err)
	must(e.GrantRole(g.ID, admin.ID, admins.ID))
	muted, err := e.AddMember(g.ID, "muted")
	must(err)

	open, err := e.AddTextChannel(g.ID, "open")
	must(err)
	must(e.SetOverwrite(open.ID, discordtest.Overwrite{ID: muted.ID, Type: discordtest.OverwriteMember, Deny: discordgo.PermissionSendMessages | discordgo.PermissionSendMessagesInThreads}))
	hidden, err := e.AddTextChannel(g.ID, "hidden")
	must(err)
	must(e.SetOverwrite(hidden.ID, discordtest.Overwrite{ID: g.ID, Type: discordtest.OverwriteRole, Deny: discordgo.PermissionViewChannel}))
	must(e.SetOverwrite(hidden.ID, discordtest.Overwrite{ID: insiders.ID, Type: discordtest.OverwriteRole, Allow: discordgo.PermissionViewChannel}))
	must(e.SetOverwrite(hidden.ID, discordtest.Overwrite{ID: e.BotUserID(), Type: discordtest.OverwriteMember, Allow: discordgo.PermissionViewChannel}))
	hiddenThread, err := e.AddThread(hidden.ID, "inside", insider.ID)
	must(err)
	openThread, err := e.AddThread(open.ID, "public", plain.ID)
	must(err)
	locked, err := e.AddThread(open.ID, "locked", plain.ID)
	must(err)
	must(e.LockThread(locked.ID, false))
	must(e.Start())
	t.Cleanup(func() { e.Close() })

	c, gw := wire(t, ClientOptions{Token: e.Token(), APIURL: e.URL()}, ClientDeps{Log: zerolog.Nop()},
		GatewayOptions{Sleep: (&sleeps{}).sleep}, GatewayDeps{Log: zerolog.Nop()})
	s := c.session()
	c.setIdentity(e.BotUserID(), "", "")
	guildSeen := make(chan struct{})
	s.AddHandlerOnce(func(*discordgo.Session, *discordgo.GuildCreate) { close(guildSeen) }) // state is updated before handlers run
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(gw.connect(cctx, s))
	t.Cleanup(func() { _ = s.Close() })
	select {
	case <-guildSeen:
	case <-cctx.Done():
		t.Fatal("no GUILD_CREATE")
	}
	// One member is not in the gateway cache: Access must fetch it.
	m, err := s.State.Member(g.ID, plain.ID)
	must(err)
	must(s.State.MemberRemove(m))

	users := []discordtest.User{plain, insider, mod, admin, muted, {ID: e.BotUserID()}}
	chans := []discordtest.Channel{open, hidden, hiddenThread, openThread, locked}
	ctx := context.Background()
	for _, ch := range chans {
		ch, _ = e.Channel(ch.ID)
		for _, u := range users {
			p := e.Permissions(u.ID, ch.ID)
			wantView := p&discordgo.PermissionViewChannel != 0
			need := int64(discordgo.PermissionSendMessages)
			if ch.IsThread() {
				need = discordgo.PermissionSendMessagesInThreads
				if ch.Locked {
					need |= discordgo.PermissionManageThreads
				}
			}
			wantSend := wantView && p&need == need
			acc, err := c.Access(ctx, u.ID, binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: ch.ID})
			if err != nil {
				t.Fatalf("Access(%s, %s): %v", u.Username, ch.Name, err)
			}
			if !acc.Exists || acc.UserView != wantView || acc.UserSend != wantSend {
				t.Errorf("%s in %s: view/send %v/%v, emulator %v/%v (perms %#x)", u.Username, ch.Name, acc.UserView, acc.UserSend, wantView, wantSend, p)
			}
		}
	}
	if n := len(e.RequestsTo("GET", "/guilds/{guild_id}/members/{user_id}")); n == 0 {
		t.Error("the uncached member was not fetched over REST")
	}
	// Unknown channels do not exist.
	if acc, err := c.Access(ctx, plain.ID, binding.ConversationRef{Channel: "discord", ConversationID: "123456789012345678"}); err != nil || acc.Exists {
		t.Errorf("unknown channel: %+v, %v", acc, err)
	}
	// Manage Server comes from roles: only the admin has it here.
	for _, u := range []discordtest.User{plain, admin} {
		mem, ok, err := c.Member(ctx, u.ID, binding.ConversationRef{Channel: "discord", ConversationID: open.ID})
		if err != nil || !ok || mem.ManageGuild != (u.ID == admin.ID) {
			t.Errorf("Member(%s) = %+v %v %v", u.Username, mem, ok, err)
		}
	}
}

// Role changes are not pushed without the GUILD_MEMBERS intent: a cached
// member is trusted for memberTTL, then fetched again, so a role granted
// (or taken) reaches the authority within that time.
func TestMemberRolesRefreshAfterTTL(t *testing.T) {
	t.Parallel()
	e := discordtest.New(discordtest.Options{})
	g := e.AddGuild("ttl")
	ch, err := e.AddTextChannel(g.ID, "general")
	if err != nil {
		t.Fatal(err)
	}
	u, err := e.AddMember(g.ID, "later-mod")
	if err != nil {
		t.Fatal(err)
	}
	mods, err := e.AddRole(g.ID, "mods", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a, gw := wire(t, ClientOptions{Token: e.Token(), APIURL: e.URL()}, ClientDeps{Log: zerolog.Nop(), Clock: clk},
		GatewayOptions{Sleep: (&sleeps{}).sleep}, GatewayDeps{Log: zerolog.Nop(), Clock: clk})
	auth := authz.New(authz.Config{OperatorRoles: []string{mods.ID}}, a)
	s := a.session()
	a.setIdentity(e.BotUserID(), "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gw.connect(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	actor := authz.Actor{UserID: u.ID, Where: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: ch.ID}}
	if auth.Operator(ctx, actor, actor.Where) {
		t.Fatal("operator before the role was granted")
	}
	if err := e.GrantRole(g.ID, u.ID, mods.ID); err != nil {
		t.Fatal(err)
	}
	fetches := len(e.RequestsTo("GET", "/guilds/{guild_id}/members/{user_id}"))
	if auth.Operator(ctx, actor, actor.Where) {
		t.Fatal("the cached member changed without an event: the emulator pushed a member event without the intent")
	}
	if n := len(e.RequestsTo("GET", "/guilds/{guild_id}/members/{user_id}")); n != fetches {
		t.Fatalf("%d member fetches within the TTL, want none", n-fetches)
	}
	clk.Advance(memberTTL)
	if !auth.Operator(ctx, actor, actor.Where) {
		t.Fatal("the granted role was not seen after the TTL")
	}
}
