package discord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/redact"
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

// Commands are the slash commands of DESIGN.md §4.
func Commands() []*discordgo.ApplicationCommand {
	return []*discordgo.ApplicationCommand{
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
		{Name: "stop", Description: "Stop this conversation's running turn, or a subagent's run", Options: []*discordgo.ApplicationCommandOption{
			opt(optString, "target", "Subagent label or session key (default: this conversation)", false),
		}},
	}
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
	return nil
}

// reply is a command's answer. Public answers are displayed to everyone
// and so go through Outbound into the chat's transcript; ephemeral ones are
// shown to one user and belong to no transcript.
type reply struct {
	text   string
	public bool
}

// userFacing is an error whose UserMessage is written for the person who
// ran the command (what was wrong, what to do). The command boundary
// (onInteraction) shows it; any other error is logged there once and the
// user reads the generic text, never the error's own words.
type userFacing interface{ UserMessage() string }

// userError is a command failure whose message is meant for the user.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

// UserMessage implements userFacing.
func (e *userError) UserMessage() string { return e.msg }

func userErrf(format string, args ...any) error { return &userError{fmt.Sprintf(format, args...)} }

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
	if in.Type == discordgo.InteractionMessageComponent {
		g.onComponent(ctx, in)
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
		var uf userFacing
		text := "⚠️ Something went wrong; the bot logged the details."
		if errors.As(err, &uf) {
			text = "⚠️ " + redact.String(userText(uf))
		} else {
			g.log.Error().Err(err).Str("command", v.name).Msg("slash command failed")
		}
		r = reply{text: text}
	}
	g.answer(ctx, v, r)
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

func (g *Gateway) command(ctx context.Context, v invocation) (reply, error) {
	switch v.name {
	case "spawn":
		return g.cmdSpawn(ctx, v)
	case "focus":
		return g.cmdFocus(ctx, v)
	case "unfocus":
		return g.cmdUnbind(ctx, v, "unfocus")
	case "agents":
		return g.cmdAgents(v), nil
	case "session":
		return g.cmdSession(ctx, v)
	case "cron":
		return g.cmdCron(ctx, v)
	case "stop":
		return g.cmdStop(ctx, v)
	case "reset":
		if _, err := g.d.Sessions.Reset(ctx, v.conv); err != nil {
			return reply{}, err
		}
		return reply{text: "🧹 Started a new conversation here. Earlier messages stay in the record but are no longer in my context.", public: true}, nil
	}
	return reply{}, userErrf("Unknown command /%s.", v.name)
}

func (g *Gateway) cmdSpawn(ctx context.Context, v invocation) (reply, error) {
	if name := v.str("agent"); g.d.ACP != nil && g.d.ACP.Has(name) {
		return g.cmdStartACP(ctx, v, name, v.str("task"))
	}
	// A subagent spends the model like a turn: discord.access applies.
	if msg := g.admitCommand(ctx, v); msg != "" {
		return reply{}, userErrf("%s", msg)
	}
	res, err := g.d.Sessions.Spawn(ctx, session.SpawnRequest{Task: v.str("task"), Label: v.str("label"), AgentID: v.str("agent"),
		Thread: v.boolPtr("thread"), Requester: v.conv, RequestedBy: v.userID})
	switch {
	case errors.Is(err, session.ErrEmptyTask):
		return reply{}, userErrf("Give the subagent a task, e.g. /spawn task: summarise this channel.")
	case errors.Is(err, session.ErrUnknownAgent):
		return reply{}, userErrf("There is no agent %q; leave agent empty for the default.", v.str("agent"))
	case errors.Is(err, session.ErrTooManySubagents):
		return reply{}, userErrf("Too many subagents are running; wait for one to finish. (%v)", err)
	case errors.Is(err, delivery.ErrForbidden):
		return reply{}, userErrf("I may not create a thread here: give me Create Public Threads and Send Messages in Threads in this channel, or run /spawn with thread:false.")
	case errors.Is(err, delivery.ErrTransient):
		return reply{}, userErrf("Discord did not answer in time; nothing was started. Try again in a moment.")
	case err != nil:
		return reply{}, err
	}
	return reply{text: res.Summary(), public: true}, nil
}

// cmdStop ends this conversation's running turn, or the named subagent's
// run (its model call is cancelled). One's own run, or an operator.
func (g *Gateway) cmdStop(ctx context.Context, v invocation) (reply, error) {
	target := v.str("target")
	if rec, ok := g.acpBinding(v.conv); ok && target == "" {
		return g.cmdStopACP(ctx, v, rec)
	}
	var key, what string
	idle := "ℹ️ Nothing is running in this conversation."
	if target == "" {
		key, _, _ = g.d.Outbound.SessionFor(v.conv)
		what = "this conversation's turn"
	} else {
		info, ok := g.findSession(target)
		if !ok {
			return reply{}, userErrf("Nothing is named %s: give a subagent label or a session key (see /agents).", target)
		}
		key, what = info.Key, "`"+info.Key+"`"
		if info.Label != "" {
			what = "**" + info.Label + "**"
		}
		idle = "ℹ️ " + what + " is not running."
	}
	run, ok := g.d.Sessions.Running(key)
	if !ok {
		return reply{text: idle}, nil
	}
	if err := g.d.Authority.MayStop(ctx, authz.Actor{UserID: v.userID, Where: v.conv}, run.Owner, what); err != nil {
		return reply{}, userErrf("%s", refusalText(err))
	}
	if !g.d.Sessions.Stop(run) {
		return reply{text: "ℹ️ It had already finished."}, nil
	}
	return reply{text: "⏹️ Stopped " + what + "."}, nil
}

// cmdFocus binds this thread (or a new child thread when run in a channel)
// to a subagent by label or to a session key.
func (g *Gateway) cmdFocus(ctx context.Context, v invocation) (reply, error) {
	if !g.opt.ThreadBindings {
		return reply{}, userErrf("Thread bindings are disabled (set discord.threadBindings.enabled: true).")
	}
	target := v.str("target")
	if target == "" {
		return reply{}, userErrf("Usage: /focus target:<subagent-label|session-key>")
	}
	if name, ok := strings.CutPrefix(target, "acp:"); ok && g.d.ACP != nil && g.d.ACP.Has(name) {
		return g.cmdStartACP(ctx, v, name, "")
	}
	info, ok := g.findSession(target)
	if !ok {
		return reply{}, userErrf("Unable to resolve focus target: %s", target)
	}
	if err := g.d.Authority.MayFocus(ctx, authz.Actor{UserID: v.userID, Where: v.conv}, authz.FocusTarget{Key: info.Key, Kind: string(info.Kind),
		Conversation: info.Requester, SpawnedBy: info.SpawnedBy}); err != nil {
		return reply{}, userErrf("%s", refusalText(err))
	}
	if strings.HasPrefix(v.conv.ConversationID, "user:") {
		return reply{}, userErrf("/focus must be run in a server channel or thread.")
	}
	if cur, bound := g.d.Bindings.ResolveByConversation(v.conv); bound && !g.mayChange(v, cur) {
		return reply{}, userErrf("Only <@%s> can refocus this conversation.", cur.BoundBy)
	}
	kind := binding.KindSession
	if info.Kind == session.KindSubagent {
		kind = binding.KindSubagent
	}
	conv := v.conv
	created := false
	if conv.ParentConversationID == "" { // a channel: bind a new child thread
		th, err := g.c.CreateThread(ctx, conv, truncateRunes("🤖 "+firstNonEmpty(info.Label, info.AgentID), 100))
		if err != nil {
			return reply{}, fmt.Errorf("focus: %w", err)
		}
		conv, created = th, true
	}
	// A session is bound to one conversation at a time: Bind moves it
	// here and the old thread is told where it went.
	var moved []string
	for _, b := range g.d.Bindings.ListBySession(info.Key) {
		if b.Conversation.Key() != conv.Key() {
			moved = append(moved, "<#"+b.Conversation.ConversationID+">")
		}
	}
	_, err := g.d.Bindings.Bind(ctx, binding.BindInput{TargetSessionKey: info.Key, TargetKind: kind, Conversation: conv, AgentID: info.AgentID,
		Label: info.Label, BoundBy: v.userID})
	if err != nil {
		return reply{}, fmt.Errorf("focus: %w", err)
	}
	from := ""
	if len(moved) > 0 {
		from = " It was bound to " + strings.Join(moved, ", ") + " before; it is bound here only now."
	}
	if created {
		return reply{text: fmt.Sprintf("✅ Created thread <#%s> and bound it to %s (%s).%s", conv.ConversationID, info.Key, kind, from), public: true}, nil
	}
	return reply{text: fmt.Sprintf("✅ Bound this thread to %s (%s).%s", info.Key, kind, from), public: true}, nil
}

// refusalText is an authority refusal as a sentence for the user.
func refusalText(err error) string {
	msg := err.Error()
	if r := []rune(msg); len(r) > 0 {
		msg = strings.ToUpper(string(r[0])) + string(r[1:])
	}
	return msg + "."
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func (g *Gateway) findSession(target string) (session.Info, bool) {
	if in, ok := g.d.Sessions.Info(target); ok {
		return in, true
	}
	matches := g.d.Sessions.Sessions(func(in session.Info) bool { return in.Label == target })
	if len(matches) == 0 {
		return session.Info{}, false
	}
	return matches[len(matches)-1], true
}

// mayChange: the binder, a system binding, or an operator.
func (g *Gateway) mayChange(v invocation, rec binding.Record) bool {
	return rec.BoundBy == "" || rec.BoundBy == "system" || rec.BoundBy == v.userID || g.isOperator(v)
}

// isOperator asks the one authority rule (core/authz): configured operator
// users or roles; with none configured, members with Manage Server. The
// model's tools ask the same rule.
func (g *Gateway) isOperator(v invocation) bool {
	return g.d.Authority.Operator(g.workCtx(), authz.Actor{UserID: v.userID, Where: v.conv})
}

func (g *Gateway) cmdUnbind(ctx context.Context, v invocation, verb string) (reply, error) {
	rec, ok := g.d.Bindings.ResolveByConversation(v.conv)
	if !ok {
		return reply{text: "ℹ️ This conversation is not currently bound."}, nil
	}
	if !g.mayChange(v, rec) {
		return reply{}, userErrf("Only <@%s> can %s this conversation.", rec.BoundBy, verb)
	}
	if _, err := g.d.Bindings.Unbind(ctx, binding.UnbindInput{ID: rec.ID, Reason: binding.ReasonManual}); err != nil {
		return reply{}, fmt.Errorf("%s: %w", verb, err)
	}
	return reply{text: "✅ Conversation unbound; messages here go to the channel's own agent again."}, nil
}

func (g *Gateway) cmdAgents(v invocation) reply {
	key, _, _ := g.d.Outbound.SessionFor(v.conv)
	runs := g.d.Sessions.Sessions(func(in session.Info) bool {
		return in.Kind == session.KindSubagent && (in.Parent == key || in.Requester.Key() == v.conv.Key())
	})
	var b strings.Builder
	b.WriteString("agents:\n-----\n")
	if len(runs) == 0 {
		b.WriteString("(none)\n")
	}
	for i, in := range runs {
		where := "unbound"
		if bs := g.d.Bindings.ListBySession(in.Key); len(bs) > 0 {
			where = "thread <#" + bs[0].Conversation.ConversationID + ">"
		} else if in.Thread != "" {
			where = "thread " + in.Thread + " (binding ended)"
		}
		fmt.Fprintf(&b, "%d. %s (%s) — %s, `%s`\n", i+1, in.Label, where, in.Status, in.Key)
		if in.Status == session.StatusUndeliver {
			fmt.Fprintf(&b, "   result kept: %s\n", excerpt(in.Result, 300))
		}
	}
	return reply{text: b.String()}
}

func excerpt(s string, n int) string { return truncateRunes(s, n) }

// parseDuration reads /session durations: off|0 disables, a bare number is
// hours, else a Go duration or Nd for days.
func parseDuration(s string) (time.Duration, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "off", "disable", "disabled", "none", "0":
		return 0, nil
	}
	// Every form gets the same bounds (1 minute to 1 year).
	var d time.Duration
	var err error
	if n, perr := strconv.ParseFloat(s, 64); perr == nil && n > 0 {
		d = time.Duration(n * float64(time.Hour))
	} else if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, perr := strconv.ParseFloat(days, 64); perr == nil && n > 0 {
			d = time.Duration(n * 24 * float64(time.Hour))
		} else {
			err = perr
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < time.Minute || d > 365*24*time.Hour {
		return 0, userErrf("Usage: /session idle <duration|off> | /session max-age <duration|off> | /session unbind (example: /session idle 24h)")
	}
	return d, nil
}

func (g *Gateway) cmdSession(ctx context.Context, v invocation) (reply, error) {
	if v.sub == "unbind" {
		return g.cmdUnbind(ctx, v, "unbind")
	}
	rec, ok := g.d.Bindings.ResolveByConversation(v.conv)
	if !ok {
		return reply{text: "ℹ️ This conversation is not currently bound."}, nil
	}
	raw := v.str("duration")
	what, cur := "Idle timeout", rec.IdleTimeout
	if v.sub == "max-age" {
		what, cur = "Max age", rec.MaxAge
	}
	if raw == "" {
		if cur == 0 {
			return reply{text: fmt.Sprintf("ℹ️ %s is currently disabled for this bound session.", what)}, nil
		}
		return reply{text: fmt.Sprintf("ℹ️ %s active (%s, next auto-unbind at %s).", what, session.FormatDuration(cur), rec.ExpiresAt().UTC().Format(time.RFC3339))}, nil
	}
	if !g.mayChange(v, rec) {
		return reply{}, userErrf("Only <@%s> can update session lifecycle settings for this conversation.", rec.BoundBy)
	}
	d, err := parseDuration(raw)
	if err != nil {
		return reply{}, err
	}
	var idle, maxAge *time.Duration
	if v.sub == "max-age" {
		maxAge = &d
	} else {
		idle = &d
	}
	// Only this conversation's binding: other conversations bound to the
	// same session (a store from before bindings moved) belong to whoever
	// bound them.
	if _, err := g.d.Bindings.SetTimeouts(ctx, rec.ID, idle, maxAge); err != nil {
		return reply{}, fmt.Errorf("set %s: %w", strings.ToLower(what), err)
	}
	if d == 0 {
		return reply{text: fmt.Sprintf("✅ %s disabled for this conversation's binding.", what)}, nil
	}
	return reply{text: fmt.Sprintf("✅ %s set to %s for this conversation's binding.", what, session.FormatDuration(d))}, nil
}
