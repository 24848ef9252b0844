package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usertext"
)

func opt(t discordgo.ApplicationCommandOptionType, name, desc string, required bool) *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{Type: t, Name: name, Description: desc, Required: required}
}

func sub(name, desc string, opts ...*discordgo.ApplicationCommandOption) *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: name, Description: desc, Options: opts}
}

const (
	optString = discordgo.ApplicationCommandOptionString
	optBool   = discordgo.ApplicationCommandOptionBoolean
)

// Commands are the slash commands of DESIGN.md §4; the options naming a
// job, a run, a label or an agent (and /session's durations) are
// registered with autocomplete.
func Commands() []*discordgo.ApplicationCommand {
	return withAutocomplete([]*discordgo.ApplicationCommand{
		{Name: "spawn", Description: "Start a subagent on a task", Options: []*discordgo.ApplicationCommandOption{
			opt(optString, "task", "What the subagent should do", true),
			opt(optString, "label", "A short name for it", false),
			opt(optString, "agent", "Which agent persona runs it, or an external coding agent (acp.agents)", false),
			opt(optBool, "thread", "Give it its own thread", false),
		}},
		{Name: "focus", Description: "Bind this thread (or a new one) to a session or subagent", Options: []*discordgo.ApplicationCommandOption{
			opt(optString, "target", "Subagent label, session key, or acp:<agent> for an external coding agent", true),
		}},
		{Name: "unfocus", Description: "End this conversation's binding"},
		{Name: "agents", Description: "Subagent runs and bindings of this conversation"},
		{Name: "usage", Description: "Your model tokens and cost (operators: this server's too)", Options: []*discordgo.ApplicationCommandOption{
			opt(optString, "period", "day, week or month (default day)", false),
		}},
		{Name: "session", Description: "Binding lifecycle of this conversation", Options: []*discordgo.ApplicationCommandOption{
			sub("idle", "Show or set the idle auto-unbind (e.g. 24h, 30m, off)", opt(optString, "duration", "Duration or off", false)),
			sub("max-age", "Show or set the hard max age (e.g. 72h, off)", opt(optString, "duration", "Duration or off", false)),
			sub("unbind", "End this conversation's binding"),
		}},
		{Name: "cron", Description: "Scheduled jobs", Options: []*discordgo.ApplicationCommandOption{
			sub("add", "Schedule a job",
				opt(optString, "schedule", "Cron expression, 'every 10m' or 'at <RFC 3339 time>'", true),
				opt(optString, "prompt", "What the agent should do each run", true),
				opt(optString, "target", "main | isolated | current | session:<key>", false),
				opt(optString, "tz", "IANA time zone, e.g. Europe/Berlin", false),
				opt(optString, "to", "Where results go: channel:<id> or user:<id>", false)),
			sub("list", "List jobs"),
			sub("remove", "Remove a job", opt(optString, "id", "Job id", true)),
			sub("run", "Run a job now", opt(optString, "id", "Job id", true)),
			sub("runs", "Recent runs of a job", opt(optString, "id", "Job id", true)),
		}},
		{Name: "reset", Description: "Start a new conversation with the agent in this chat"},
		{Name: "memory", Description: "Recall earlier messages and the agent's notes (memory.enabled)", Options: []*discordgo.ApplicationCommandOption{
			sub("search", "Search earlier messages of the conversations you can view (only you see the answer)",
				opt(optString, "query", "Words to look for", true)),
			sub("list", "Notes in scope here: yours, this conversation's and this server's (only you see the answer)"),
			sub("forget", "Forget a note: its message is deleted", opt(optString, "id", "Note id (/memory list shows them)", true)),
		}},
		{Name: "stop", Description: "Stop this conversation's running turn, or a subagent's run", Options: []*discordgo.ApplicationCommandOption{
			opt(optString, "target", "Subagent label or session key (default: this conversation)", false),
		}},
		{Name: "ps", Description: "Commands the external agent bound to this thread is running"},
	})
}

func (g *Gateway) registerCommands(ctx context.Context) error {
	s := g.c.session()
	_, appID := g.c.ids()
	if appID == "" {
		return errors.New("discord: READY carried no application id; cannot register commands")
	}
	// With a guild allowlist the commands are registered per guild, where
	// Discord applies them at once (global ones can take up to an hour).
	guilds := []string{""}
	if len(g.c.opt.Guilds) > 0 {
		guilds = g.c.opt.Guilds
	}
	for _, gid := range guilds {
		if _, err := s.ApplicationCommandBulkOverwrite(appID, gid, Commands(), discordgo.WithContext(ctx)); err != nil {
			g.c.countError(err)
			return fmt.Errorf("discord: register slash commands (guild %q): %w", gid, err)
		}
	}
	if len(g.c.opt.Guilds) > 0 {
		// A global registration left from a run without the list would
		// still offer the commands in every guild: remove it.
		if _, err := s.ApplicationCommandBulkOverwrite(appID, "", []*discordgo.ApplicationCommand{}, discordgo.WithContext(ctx)); err != nil {
			g.c.countError(err)
			return fmt.Errorf("discord: remove the global slash commands: %w", err)
		}
	}
	return nil
}

// reply is a command's answer (core/command.Reply). Public answers are
// displayed to everyone and so go through Outbound into the chat's
// transcript; ephemeral ones are shown to one user and belong to no
// transcript.
type reply struct {
	text   string
	public bool
}

// invocation is one slash command call.
type invocation struct {
	in     *discordgo.Interaction
	name   string
	sub    string
	opts   map[string]*discordgo.ApplicationCommandInteractionDataOption
	userID string
	conv   binding.ConversationRef
	// deferred is the interaction's deferral, settled when its answer is sent.
	deferred *deferral
}

// str is a string option's value ("" when absent or of another type:
// discordgo's StringValue panics on a mismatched type, and an interaction
// for a stale command registration can carry one).
func (v invocation) str(name string) string {
	if o, ok := v.opts[name]; ok && o.Type == discordgo.ApplicationCommandOptionString {
		if s, ok := o.Value.(string); ok {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// boolPtr is a boolean option's value, nil when absent or of another type.
func (v invocation) boolPtr(name string) *bool {
	if o, ok := v.opts[name]; ok && o.Type == discordgo.ApplicationCommandOptionBoolean {
		if b, ok := o.Value.(bool); ok {
			return &b
		}
	}
	return nil
}

// parseInvocation reads a slash command's name, subcommand and options.
func parseInvocation(in *discordgo.Interaction) invocation {
	data := in.ApplicationCommandData()
	v := invocation{in: in, name: data.Name, opts: map[string]*discordgo.ApplicationCommandInteractionDataOption{}}
	options := data.Options
	if len(options) == 1 && options[0] != nil && options[0].Type == discordgo.ApplicationCommandOptionSubCommand {
		v.sub, options = options[0].Name, options[0].Options
	}
	for _, o := range options {
		if o != nil {
			v.opts[o.Name] = o
		}
	}
	switch {
	case in.Member != nil && in.Member.User != nil:
		v.userID = in.Member.User.ID
	case in.User != nil:
		v.userID = in.User.ID
	}
	return v
}

func (g *Gateway) onInteraction(ctx context.Context, in *discordgo.Interaction) {
	switch in.Type {
	case discordgo.InteractionMessageComponent:
		g.onComponent(ctx, in)
		return
	case discordgo.InteractionApplicationCommandAutocomplete:
		g.onAutocomplete(ctx, in)
		return
	}
	if in.Type != discordgo.InteractionApplicationCommand {
		return
	}
	v := parseInvocation(in)
	v.conv = g.conversationOf(in.GuildID, in.ChannelID, v.userID)
	if in.Member != nil {
		g.c.noteMember(g.c.session(), in.GuildID, in.Member, in.Member.User) // fresh roles for the authority
	}
	// Discord forgets an interaction not answered within 3 s: a command
	// still running after deferAfter is deferred (type 5) and its reply
	// later edits @original (invariant 15).
	// The timer runs until the answer is about to be sent: a public one
	// may wait behind its conversation's other sends (Interaction.Settle).
	df := &deferral{}
	v.deferred = df
	df.timer = time.AfterFunc(deferAfter, func() { g.deferReply(ctx, v, df) })
	r, err := g.command(ctx, v)
	if err != nil {
		text, internal := usertext.ForChat(err)
		if internal {
			g.log.Error().Err(err).Str("command", v.name).Msg("slash command failed")
		}
		r = reply{text: text}
	}
	g.answer(ctx, v, r)
}

// command runs the invocation's command (core/command: the logic and its
// wording are platform-neutral; this adapter only parsed it and answers).
func (g *Gateway) command(ctx context.Context, v invocation) (reply, error) {
	if g.d.Commands == nil {
		return reply{}, errors.New("discord: no commands are wired")
	}
	r, err := g.d.Commands.Run(ctx, g.coreInvocation(v))
	return reply{text: r.Text, public: r.Public}, err
}

// coreInvocation is v as the core's commands take it: options by their
// Discord type (a string, a bool, an integer), Discord's words for the
// texts, and discord.access as the admission of model work.
func (g *Gateway) coreInvocation(v invocation) command.Invocation {
	opts := make(map[string]any, len(v.opts))
	for name, o := range v.opts {
		switch o.Type {
		case optString:
			opts[name] = v.str(name)
		case optBool:
			if b := v.boolPtr(name); b != nil {
				opts[name] = *b
			}
		case discordgo.ApplicationCommandOptionInteger:
			if n, ok := o.Value.(float64); ok { // JSON numbers
				opts[name] = int64(n)
			}
		}
	}
	return command.Invocation{Platform: CommandPlatform(g.opt.ThreadBindings), Conversation: v.conv, UserID: v.userID,
		Name: v.name, Sub: v.sub, Options: opts, Admit: func(ctx context.Context) string { return g.admitCommand(ctx, v) }}
}

// CommandPlatform is how the core's command texts speak on Discord: slash
// commands, options as the client shows them ("thread:false", and
// "task: summarise this channel" for a value of several words), <@user>
// mentions (sent without pings) and <#channel> links.
func CommandPlatform(threadBindings bool) command.Platform {
	return command.Platform{
		Name:   "Discord",
		Prefix: "/",
		Option: func(name, value string) string {
			if strings.ContainsRune(value, ' ') {
				return name + ": " + value
			}
			return name + ":" + value
		},
		Mention:               func(id string) string { return "<@" + id + ">" },
		Link:                  func(c binding.ConversationRef) string { return "<#" + c.ConversationID + ">" },
		SharedPlace:           "a server channel or thread",
		ThreadPermissions:     "Create Public Threads and Send Messages in Threads in this channel",
		ThreadBindings:        threadBindings,
		ThreadBindingsSetting: "discord.threadBindings.enabled",
	}
}

// answer sends the reply: public ones through Outbound (one writer),
// ephemeral ones straight to the interaction.
func (g *Gateway) answer(ctx context.Context, v invocation, r reply) {
	s := g.c.session()
	if r.public {
		_, err := g.d.Outbound.Deliver(ctx, delivery.Delivery{ID: "cmd:" + v.in.ID, Target: v.conv, Text: r.text,
			Interaction: &delivery.Interaction{ID: v.in.ID, Token: v.in.Token, Settle: v.deferred.settle},
			Producer:    delivery.Producer{Source: transcript.SourceCommand}}, nil)
		if err != nil {
			g.log.Error().Err(err).Str("command", v.name).Msg("public command reply failed")
		}
		if deferred := v.deferred.settle(); deferred {
			// Settle the caller's "thinking" placeholder (best effort).
			text := "✅ Answered in the channel."
			if err != nil {
				text = "⚠️ The answer could not be posted; the bot logged the details."
			}
			if _, err := s.InteractionResponseEdit(v.in, &discordgo.WebhookEdit{Content: &text, AllowedMentions: noMentions()}, discordgo.WithContext(ctx)); err != nil {
				g.c.countError(err)
			}
		}
		return
	}
	text := truncateRunes(r.text, MaxMessageLen)
	var err error
	if v.deferred.settle() {
		// Deferred as ephemeral: the edit is shown to the caller only.
		_, err = s.InteractionResponseEdit(v.in, &discordgo.WebhookEdit{Content: &text, AllowedMentions: noMentions()}, discordgo.WithContext(ctx))
	} else {
		err = s.InteractionRespond(v.in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}}, discordgo.WithContext(ctx))
	}
	if err != nil {
		g.c.countError(err)
		g.log.Warn().Err(restError(err)).Str("command", v.name).Msg("ephemeral reply failed")
	}
}

// deferAfter is how long a command may run before its interaction is
// deferred: well inside Discord's 3 s, with room for the callback.
const deferAfter = 1500 * time.Millisecond

// deferral is an interaction's deferred-response state. A deferral is
// always ephemeral (only the caller sees "thinking"): a public answer is
// then a followup, a new message displayed when it is posted, so the
// transcript order stays the display order.
type deferral struct {
	timer    *time.Timer
	mu       sync.Mutex
	settled  bool // the answer is being sent: too late to defer
	deferred bool
}

// settle ends the deferral timer (waiting for a deferral in flight) and
// reports whether the interaction was deferred. Calls after the first
// report the same.
func (d *deferral) settle() bool {
	if d == nil {
		return false
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.settled = true
	return d.deferred
}

// deferReply sends the deferred response (type 5) unless the command
// finished first. The answer waits for it (the lock) and then edits.
func (g *Gateway) deferReply(ctx context.Context, v invocation, d *deferral) {
	defer g.recoverHandler("defer_interaction")
	d.mu.Lock()
	defer d.mu.Unlock()
	s := g.c.session()
	if d.settled {
		return
	}
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}}
	err := s.InteractionRespond(v.in, resp, discordgo.WithContext(ctx))
	code, _, _ := restCode(err)
	if err != nil && code != codeAlreadyAcked {
		g.c.countError(err)
		// A dropped response may still have deferred it: the reply path
		// reconciles through @original either way.
		g.log.Warn().Err(err).Str("command", v.name).Msg("defer interaction")
		if code != 0 {
			return
		}
	}
	d.deferred = true
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
