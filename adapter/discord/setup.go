package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
)

// Permission is one permission bit the bot's features use, with the
// feature that needs it: the invite URL asks for all of them, and the live
// check reports the ones missing where.
type Permission struct {
	Bit     int64
	Name    string // as the Discord client names it
	Feature string // what breaks without it
	// Threads: needed only while discord.threadBindings.enabled is on.
	Threads bool
	// Optional: the bot works without it (degraded); never exit 1 for it.
	Optional bool
}

// Permissions is the table of which feature needs which bit.
var Permissions = []Permission{
	{Bit: discordgo.PermissionViewChannel, Name: "View Channel", Feature: "see the channel and its messages"},
	{Bit: discordgo.PermissionSendMessages, Name: "Send Messages", Feature: "reply in channels"},
	{Bit: discordgo.PermissionReadMessageHistory, Name: "Read Message History", Feature: "reply to a message, catch up after a restart"},
	{Bit: discordgo.PermissionEmbedLinks, Name: "Embed Links", Feature: "link previews in replies", Optional: true},
	{Bit: discordgo.PermissionSendMessagesInThreads, Name: "Send Messages in Threads", Feature: "reply in bound threads (/focus, subagents)", Threads: true},
	{Bit: discordgo.PermissionCreatePublicThreads, Name: "Create Public Threads", Feature: "/focus and subagent threads", Threads: true},
	{Bit: discordgo.PermissionManageWebhooks, Name: "Manage Webhooks", Feature: "post as each agent persona (name, avatar) in threads", Threads: true},
}

// InvitePermissions is the permission integer of the invite URL: every bit
// of the table.
func InvitePermissions() int64 {
	var p int64
	for _, x := range Permissions {
		p |= x.Bit
	}
	return p
}

// InviteURL is the OAuth2 URL that adds the bot to a server with the bot
// and applications.commands scopes and the permissions of the table.
func InviteURL(appID string) string {
	return "https://discord.com/oauth2/authorize?client_id=" + appID + "&scope=bot+applications.commands&permissions=" +
		strconv.FormatInt(InvitePermissions(), 10)
}

// Application flags that allow the Message Content intent: the first once a
// verified bot is approved for it, the second when it is switched on in the
// Developer Portal for a bot in under 100 servers.
const (
	AppFlagGatewayMessageContent        = 1 << 18
	AppFlagGatewayMessageContentLimited = 1 << 19
)

// Application is what GET /applications/@me says about the bot's application.
type Application struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Flags int    `json:"flags"`
}

// MessageContent reports whether the Message Content intent is enabled.
func (a Application) MessageContent() bool {
	return a.Flags&(AppFlagGatewayMessageContent|AppFlagGatewayMessageContentLimited) != 0
}

// MessageContentFix says how to enable the Message Content intent.
func MessageContentFix(appID string) string {
	return "open https://discord.com/developers/applications/" + appID +
		"/bot, switch on Privileged Gateway Intents → Message Content Intent, and save"
}

// GuildRef names a guild the bot is in.
type GuildRef struct{ ID, Name string }

// CheckOptions configure a Checker: the token and API base of the config,
// and what the config asks of the bot.
type CheckOptions struct {
	Token, APIURL  string
	BaseTransport  http.RoundTripper
	Guilds         []string // served guilds; empty = every guild the bot is in
	ThreadBindings bool
	// AllowChannels / DenyChannels are discord.access's channel lists: a
	// denied channel is not checked; with an allow list only those are.
	AllowChannels, DenyChannels []string
	// Routes are agents[].channels: claimed id -> agent. An id that is no
	// served server, nor a category or channel in one, is a finding
	// (Matrix room ids, "!room:server", are not Discord's to check).
	Routes map[string]string
}

// Checker talks to Discord's REST API (no gateway) to check a token and
// what the bot may do where. Used by `bot setup`, `bot doctor -live` and at
// the start of `bot run`.
type Checker struct {
	s *discordgo.Session
	o CheckOptions
}

// ErrBadToken: Discord refused the token (401).
//
//lint:ignore ST1005 it starts with a name (Discord) and is shown as is
var ErrBadToken = errors.New("Discord refused the token")

// NewChecker builds a Checker. A token is trimmed of the spaces, newlines
// and "Bot " prefix a paste often carries.
func NewChecker(o CheckOptions) (*Checker, error) {
	o.Token = CleanToken(o.Token)
	if o.Token == "" {
		return nil, fmt.Errorf("discord: no token: %w", ErrBadToken)
	}
	ts := &tokenSource{}
	ts.Set(o.Token)
	tr, err := newTransport(o.APIURL, ts, o.BaseTransport)
	if err != nil {
		return nil, err
	}
	s, err := discordgo.New("Bot " + o.Token)
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	s.Client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	s.StateEnabled = false
	return &Checker{s: s, o: o}, nil
}

// CleanToken removes what a pasted token often carries around it.
func CleanToken(tok string) string {
	tok = strings.TrimSpace(tok)
	tok = strings.TrimPrefix(tok, "Bot ")
	return strings.TrimSpace(tok)
}

func checkErr(op string, err error) error {
	if code, status, ok := restCode(err); ok && status == http.StatusUnauthorized {
		return fmt.Errorf("discord: %s: %w (reset it in the Developer Portal: Bot → Reset Token; code %d)", op, ErrBadToken, code)
	}
	return fmt.Errorf("discord: %s: %w", op, err)
}

// Me is the bot user the token belongs to (GET /users/@me).
func (c *Checker) Me(ctx context.Context) (id, name string, err error) {
	u, err := c.s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return "", "", checkErr("get bot user", err)
	}
	return u.ID, u.Username, nil
}

// Application reads the bot's application (GET /applications/@me).
func (c *Checker) Application(ctx context.Context) (Application, error) {
	ep := discordgo.EndpointApplication("@me")
	raw, err := c.s.RequestWithBucketID("GET", ep, nil, ep, discordgo.WithContext(ctx))
	if err != nil {
		return Application{}, checkErr("get application", err)
	}
	var a Application
	if err := json.Unmarshal(raw, &a); err != nil {
		return Application{}, fmt.Errorf("discord: get application: %w", err)
	}
	return a, nil
}

// Guilds lists the guilds the bot is in (GET /users/@me/guilds, paged).
func (c *Checker) Guilds(ctx context.Context) ([]GuildRef, error) {
	var out []GuildRef
	after := ""
	for {
		page, err := c.s.UserGuilds(200, "", after, false, discordgo.WithContext(ctx))
		if err != nil {
			return nil, checkErr("list guilds", err)
		}
		for _, g := range page {
			out = append(out, GuildRef{ID: g.ID, Name: g.Name})
		}
		if len(page) < 200 {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// Finding is one place where the bot lacks what the config needs.
type Finding struct {
	Guild, GuildID     string
	Channel, ChannelID string // empty: the whole guild (or the application)
	Missing            []Permission
	Problem            string // when not a permission (intent, not in the guild)
	Required           bool   // false: degraded or possibly intended
	Fix                string
}

// MissingNames joins the missing permissions' names.
func (f Finding) MissingNames() string {
	names := make([]string, len(f.Missing))
	for i, p := range f.Missing {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// NeededFor joins what the missing permissions are needed for.
func (f Finding) NeededFor() string {
	var s []string
	for _, p := range f.Missing {
		s = append(s, p.Feature)
	}
	return strings.Join(s, "; ")
}

// Check finds what the bot cannot do that the config needs: the Message
// Content intent, the served guilds it is not in, and per guild and text
// channel the permissions missing (from its roles, or denied by the
// channel's overwrites), with the fix.
func (c *Checker) Check(ctx context.Context) ([]Finding, error) {
	botID, botName, err := c.Me(ctx)
	if err != nil {
		return nil, err
	}
	app, err := c.Application(ctx)
	if err != nil {
		return nil, err
	}
	var out []Finding
	if !app.MessageContent() {
		out = append(out, Finding{Problem: "the Message Content intent is off: the bot sees empty messages", Required: true, Fix: MessageContentFix(app.ID)})
	}
	in, err := c.Guilds(ctx)
	if err != nil {
		return nil, err
	}
	served := in
	if len(c.o.Guilds) > 0 {
		served = nil
		for _, id := range c.o.Guilds {
			i := slices.IndexFunc(in, func(g GuildRef) bool { return g.ID == id })
			if i < 0 {
				out = append(out, Finding{GuildID: id, Guild: id, Problem: "the bot is not in this server (discord.guilds lists it)", Required: true,
					Fix: "invite it: " + InviteURL(app.ID)})
				continue
			}
			served = append(served, in[i])
		}
	}
	seen := map[string]bool{}
	for _, g := range served {
		fs, err := c.checkGuild(ctx, g, botID, botName, app.ID, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return append(out, c.unknownRoutes(seen)...), nil
}

// unknownRoutes are the agents[].channels ids that name nothing the bot
// serves (seen: the served guilds and their channels and categories).
func (c *Checker) unknownRoutes(seen map[string]bool) []Finding {
	var out []Finding
	for _, id := range slices.Sorted(maps.Keys(c.o.Routes)) {
		if seen[id] || strings.HasPrefix(id, "!") {
			continue
		}
		agent := c.o.Routes[id]
		out = append(out, Finding{ChannelID: id, Channel: id, Required: true,
			Problem: fmt.Sprintf("agent %q's channels name %s, which is no server, category or channel the bot serves", agent, id),
			Fix:     "check the id (Discord: User Settings → Advanced → Developer Mode, then right-click → Copy ID), invite the bot to its server, or remove it from agents[].channels"})
	}
	return out
}

// needed is the permissions the config needs, required ones first.
func (c *Checker) needed() []Permission {
	var out []Permission
	for _, p := range Permissions {
		if p.Threads && !c.o.ThreadBindings {
			continue
		}
		out = append(out, p)
	}
	return out
}

func (c *Checker) checkGuild(ctx context.Context, ref GuildRef, botID, botName, appID string, seen map[string]bool) ([]Finding, error) {
	rg, err := c.s.Guild(ref.ID, discordgo.WithContext(ctx))
	if err != nil {
		return nil, checkErr("get guild "+ref.ID, err)
	}
	g := guildFacts{id: rg.ID, owner: rg.OwnerID, roles: map[string]int64{}}
	for _, r := range rg.Roles {
		g.roles[r.ID] = r.Permissions
	}
	m, err := c.s.GuildMember(ref.ID, botID, discordgo.WithContext(ctx))
	if err != nil {
		return nil, checkErr("get the bot's member in guild "+ref.ID, err)
	}
	chans, err := c.s.GuildChannels(ref.ID, discordgo.WithContext(ctx))
	if err != nil {
		return nil, checkErr("list channels of guild "+ref.ID, err)
	}
	seen[rg.ID] = true
	for _, ch := range chans {
		seen[ch.ID] = true
	}
	var out []Finding
	need := c.needed()
	base := basePermissions(g, botID, m.Roles)
	if miss := missing(need, base); len(miss) > 0 {
		out = append(out, Finding{Guild: rg.Name, GuildID: rg.ID, Missing: miss, Required: anyRequired(miss),
			Fix: fmt.Sprintf("Server Settings → Roles → %s's role → enable %s (or re-invite: %s)", botName, names(miss), InviteURL(appID))})
	}
	for _, ch := range chans {
		if ch.Type != discordgo.ChannelTypeGuildText && ch.Type != discordgo.ChannelTypeGuildNews {
			continue
		}
		if slices.Contains(c.o.DenyChannels, ch.ID) || len(c.o.AllowChannels) > 0 && !slices.Contains(c.o.AllowChannels, ch.ID) {
			continue
		}
		p := channelPermissions(g, botID, m.Roles, ch.PermissionOverwrites)
		if p&discordgo.PermissionViewChannel == 0 {
			if base&discordgo.PermissionViewChannel == 0 {
				continue // reported for the whole guild
			}
			out = append(out, Finding{Guild: rg.Name, GuildID: rg.ID, Channel: "#" + ch.Name, ChannelID: ch.ID, Missing: need[:1],
				Required: len(c.o.AllowChannels) > 0, // hidden on purpose, unless discord.access.allow.channels names it
				Fix:      fmt.Sprintf("if the bot should serve #%s: Edit Channel → Permissions → %s (or its role) → allow View Channel", ch.Name, botName)})
			continue
		}
		// Only what the channel's overwrites take away: the guild-wide gaps are above.
		if miss := missing(need, p|^base); len(miss) > 0 {
			f := Finding{Guild: rg.Name, GuildID: rg.ID, Channel: "#" + ch.Name, ChannelID: ch.ID, Missing: miss, Required: anyRequired(miss),
				Fix: fmt.Sprintf("Edit Channel #%s → Permissions → remove the deny on (or allow) %s for %s or its role", ch.Name, names(miss), botName)}
			// A read-only channel (#rules, announcements): members cannot post
			// there either, so nobody will talk to the bot there.
			if channelPermissions(g, "", nil, ch.PermissionOverwrites)&discordgo.PermissionSendMessages == 0 {
				f.Required = false
				f.Fix = "read-only for @everyone too, so probably fine; if members with a role talk to the bot here: " + f.Fix
			}
			out = append(out, f)
		}
	}
	return out, nil
}

func missing(need []Permission, have int64) []Permission {
	var out []Permission
	for _, p := range need {
		if have&p.Bit == 0 {
			out = append(out, p)
		}
	}
	return out
}

func anyRequired(ps []Permission) bool {
	return slices.ContainsFunc(ps, func(p Permission) bool { return !p.Optional })
}

func names(ps []Permission) string { return Finding{Missing: ps}.MissingNames() }
