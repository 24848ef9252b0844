package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usertext"
)

// Sessions is what the Gateway needs of core/session.Manager.
type Sessions interface {
	// HandleMessage routes a user message (it dedupes by MessageID: an event handed again is taken once).
	HandleMessage(ctx context.Context, msg session.Message) error
	// MessageDeleted cancels the turn a redacted message started (nothing is posted); MessageEdited runs an edited
	// message's turn again on the new text while its model call has not returned. Each reports whether it found a
	// turn.
	MessageDeleted(ctx context.Context, messageID string) bool
	MessageEdited(messageID string) bool
	// MessageDeletedIn is MessageDeleted looked up by (conversation, message id): a Matrix redaction names its
	// event in content anyone may write.
	MessageDeletedIn(ctx context.Context, conv binding.ConversationRef, messageID string) bool
}

// Bindings is what the Gateway needs of core/binding.Service.
type Bindings interface {
	ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool)
	Unbind(ctx context.Context, in binding.UnbindInput) ([]binding.Record, error)
	Touch(id string, at time.Time)
}

// Commands runs a parsed text command for userID in conv and returns its reply. public is what Discord would show
// everyone (versus the caller only); Matrix has no messages shown to one person, so every reply is posted in the
// conversation (a transcript entry) as a reply to the command. An error with a UserMessage() string is shown as
// that; any other error is logged once and the user reads a generic text.
type Commands interface {
	Run(ctx context.Context, conv binding.ConversationRef, userID string, cmd Command) (text string, public bool, err error)
}

// Outbound is what the Gateway needs of core/delivery.Outbound.
type Outbound interface {
	Deliver(ctx context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error)
	// Delivered reports whether a delivery id was already confirmed (a command replayed after a crash is not run
	// again once its reply was shown).
	Delivered(ctx context.Context, id string) (bool, error)
	WithConversation(ref binding.ConversationRef, fn func() error) error
}

// ChatChanges records edits and redactions of displayed messages in the transcript that holds them (invariant
// 17); *core/transcript.Service implements it (it finds the session by message id itself).
type ChatChanges interface {
	Edit(ctx context.Context, messageID, editKey, text string) (bool, error)
	// Locate finds the session whose transcript holds a message.
	Locate(ctx context.Context, messageID string) (string, transcript.Entry, bool, error)
	Delete(ctx context.Context, messageID string) (bool, error)
}

// GatewayOptions are the Gateway's settings.
type GatewayOptions struct {
	// AccountID is the account of the conversation refs it builds ("" is the default account).
	AccountID string
}

// GatewayDeps are what the Gateway works with.
type GatewayDeps struct {
	Client   *Client
	Sessions Sessions
	Bindings Bindings
	Outbound Outbound
	// Commands runs text commands (nil: "!..." messages are plain messages).
	Commands Commands
	// Changes records edits and redactions (nil: not recorded).
	Changes ChatChanges
	// AcceptInvite decides whether the bot joins a room it is invited to (nil: invites from users of the bot's own
	// homeserver are accepted, others ignored: anyone on a federated server could otherwise pull the bot in).
	AcceptInvite func(roomID, inviter string) bool
	// Gate admits messages that start turns (config access, the same gate Discord asks); nil admits every one.
	Gate *authz.Gate
	// Operator reports whether a user is an operator of target, the conversation they write in (exempt from
	// Gate); nil: nobody is.
	Operator func(ctx context.Context, actor authz.Actor, target binding.ConversationRef) bool
	Clock    clock.Clock
	Log      zerolog.Logger
}

// Gateway turns the /sync loop's classified events into core calls: its Handle is the Sync loop's Handler.
//   - A message is a text command (ParseCommand) handed to Commands with its event id (the core claims it durably
//     before the command acts: an event handed again after a crash is not run again, command.ErrAlreadyRun), whose
//     reply is delivered through Outbound under "cmd:<event id>"; else it reaches Sessions.HandleMessage when it is in a DM, in a bound conversation, or
//     mentions the bot (m.mentions), with text besides the mention. Its Text is the body as displayed (Rule 1:
//     the transcript holds the text shown); the mention is only removed to judge whether anything is left.
//   - An edit (m.replace) by the original message's sender is recorded (ChatChanges.Edit, edit key = the edit's
//     event id) and re-runs a turn still running; an edit by anyone else is ignored (Matrix clients show only the
//     sender's own edits).
//   - A redaction counts only for an event of its own room, from the event's author or someone with the room's
//     redact power (redactable). Then: a redaction of a bound thread's root ends its binding
//     (binding.ReasonThreadDelete); a redaction of any message cancels the turn it started (looked up by
//     conversation and event id) and records the deletion (ChatChanges.Delete).
//   - A thread root (m.relates_to) counts only when it is an event of the message's room (Client.RootInRoom);
//     a message claiming any other root is ignored (invariant 18).
//   - An invite (AcceptInvite) is joined; an invite marked is_direct makes the room the inviter's DM (m.direct).
type Gateway struct {
	opt GatewayOptions
	d   GatewayDeps
	c   *Client
	log zerolog.Logger

	nameMu  sync.Mutex
	botName string // the bot's display name, once read
}

// NewGateway returns the Gateway. It does no I/O.
func NewGateway(opt GatewayOptions, d GatewayDeps) (*Gateway, error) {
	if d.Client == nil || d.Sessions == nil || d.Bindings == nil || d.Outbound == nil {
		return nil, errors.New("matrix: the gateway needs a client, sessions, bindings and an outbound deliverer")
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	g := &Gateway{opt: opt, d: d, c: d.Client, log: d.Log.With().Str("adapter", "matrix").Logger()}
	if g.d.AcceptInvite == nil {
		_, own, _ := strings.Cut(d.Client.UserID(), ":")
		g.d.AcceptInvite = func(_, inviter string) bool {
			_, server, ok := strings.Cut(inviter, ":")
			return ok && server == own
		}
	}
	return g, nil
}

// Handle is the Sync loop's Handler.
func (g *Gateway) Handle(ctx context.Context, in Inbound) {
	switch in.Kind {
	case KindMessage:
		g.onMessage(ctx, in)
	case KindEdit:
		g.onEdit(ctx, in)
	case KindRedaction:
		g.onRedaction(ctx, in)
	case KindInvite:
		g.onInvite(ctx, in)
	}
}

// ref is a conversation ref of this gateway's account.
func (g *Gateway) ref(conv, parent string) binding.ConversationRef {
	return binding.ConversationRef{Channel: Platform, AccountID: g.opt.AccountID, ConversationID: conv, ParentConversationID: parent}.Normalize()
}

// conversationOf is the conversation an event shows in: a thread (its root, in its room), the sender's DM (a DM
// room of theirs in m.direct), or the room. A thread root is the sender's claim: it counts only once it is known to
// be an event of the same room (Client.RootInRoom; else an error wrapping ErrForeignRoot: the message is ignored).
func (g *Gateway) conversationOf(ctx context.Context, in Inbound) (binding.ConversationRef, error) {
	if in.ThreadRoot != "" {
		if err := g.c.RootInRoom(ctx, in.RoomID, in.ThreadRoot); err != nil {
			return binding.ConversationRef{}, err
		}
		return g.ref(in.ThreadRoot, in.RoomID), nil
	}
	dm, err := g.c.DMOf(ctx, in.RoomID, in.Sender)
	if err != nil {
		return binding.ConversationRef{}, err
	}
	if dm {
		return g.ref(sessionkey.DMPrefix+in.Sender, ""), nil
	}
	return g.ref(in.RoomID, ""), nil
}

func (g *Gateway) onMessage(ctx context.Context, in Inbound) {
	if in.MsgType != "m.text" && in.MsgType != "m.emote" {
		return // media and other kinds are not read (yet)
	}
	conv, err := g.conversationOf(ctx, in)
	if err != nil {
		g.dropped(in, err)
		return
	}
	if g.d.Commands != nil {
		cmd, err := ParseCommand(in.Body)
		switch {
		case err == nil:
			g.command(ctx, in, conv, cmd)
			return
		case !errors.Is(err, ErrNotCommand):
			g.reply(ctx, in, conv, "⚠️ "+err.Error()) // ParseCommand's errors are written for the user
			return
		}
	}
	g.routeIn(ctx, in, conv, false)
}

// route hands a user message to the session when it is addressed to the bot (viaEdit: it became so by an edit).
func (g *Gateway) route(ctx context.Context, in Inbound, viaEdit bool) {
	conv, err := g.conversationOf(ctx, in)
	if err != nil {
		g.dropped(in, err)
		return
	}
	g.routeIn(ctx, in, conv, viaEdit)
}

// dropped logs a message whose conversation could not be told: a forged thread root (a warning: someone tried),
// or a failure to read what decides it.
func (g *Gateway) dropped(in Inbound, err error) {
	if errors.Is(err, ErrForeignRoot) {
		g.log.Warn().Err(err).Str("event", in.EventID).Str("room", in.RoomID).Str("sender", in.Sender).Msg("inbound message ignored: its thread root is not an event of its room")
		return
	}
	g.log.Error().Err(err).Str("event", in.EventID).Str("room", in.RoomID).Msg("inbound message dropped: its conversation is unknown")
}

func (g *Gateway) routeIn(ctx context.Context, in Inbound, conv binding.ConversationRef, viaEdit bool) {
	rec, bound := g.d.Bindings.ResolveByConversation(conv)
	if !isDMConv(conv.ConversationID) && !bound && !in.MentionsBot {
		return
	}
	if strings.TrimSpace(g.stripMention(ctx, in.Body)) == "" {
		return
	}
	if !g.admit(ctx, in, conv) {
		return
	}
	if bound {
		g.d.Bindings.Touch(rec.ID, g.d.Clock.Now())
	}
	msg := session.Message{Conversation: conv, MessageID: in.EventID, AuthorID: in.Sender,
		AuthorName: g.nameOf(ctx, in.RoomID, in.Sender), Text: in.Body, ReplyTo: in.ReplyTo, ViaEdit: viaEdit}
	if err := g.d.Sessions.HandleMessage(ctx, msg); err != nil {
		if errors.Is(err, session.ErrStopping) {
			g.log.Info().Str("event", in.EventID).Msg("inbound message left for the next start (stopping)")
			return
		}
		g.log.Error().Err(err).Str("event", in.EventID).Msg("inbound message not handled")
	}
}

// command runs a text command and delivers its reply, once per command event.
func (g *Gateway) command(ctx context.Context, in Inbound, conv binding.ConversationRef, cmd Command) {
	if done, err := g.d.Outbound.Delivered(ctx, "cmd:"+in.EventID); err == nil && done {
		g.log.Debug().Str("event", in.EventID).Msg("command already answered (event handed again)")
		return
	}
	cmd.EventID = in.EventID
	text, _, err := g.d.Commands.Run(ctx, conv, in.Sender, cmd)
	if errors.Is(err, command.ErrAlreadyRun) {
		// Handed again after a crash that came after the command ran (its reply, if any, is in the outbox: the
		// recovery that runs before this loop starts has sent it).
		g.log.Info().Str("event", in.EventID).Str("command", cmd.Name).Msg("command event handed again: not run twice")
		return
	}
	if err != nil {
		var internal bool
		if text, internal = usertext.ForChat(err); internal {
			g.log.Error().Err(err).Str("command", cmd.Name).Str("event", in.EventID).Msg("text command failed")
		}
	}
	if strings.TrimSpace(text) == "" {
		return
	}
	g.reply(ctx, in, conv, text)
}

// reply delivers a command's answer into its conversation, as a reply to the command.
func (g *Gateway) reply(ctx context.Context, in Inbound, conv binding.ConversationRef, text string) {
	_, err := g.d.Outbound.Deliver(ctx, delivery.Delivery{ID: "cmd:" + in.EventID, Target: conv, Text: text, ReplyTo: in.EventID,
		Producer: delivery.Producer{Source: transcript.SourceCommand}}, nil)
	if err != nil {
		g.log.Error().Err(err).Str("event", in.EventID).Msg("command reply not delivered")
	}
}

// stripMention removes the bot's mention from a body: its user id anywhere, and its display name at the start
// followed by ":" or "," (what clients put in a body for a mention pill).
func (g *Gateway) stripMention(ctx context.Context, body string) string {
	body = strings.ReplaceAll(body, g.c.UserID(), "")
	if name := g.ownName(ctx); name != "" {
		t := strings.TrimSpace(body)
		if rest, ok := strings.CutPrefix(t, name); ok && (rest == "" || rest[0] == ':' || rest[0] == ',' || rest[0] == ' ') {
			body = strings.TrimLeft(rest, ":, ")
		}
	}
	return body
}

// ownName is the bot's display name (read once; "" until a read succeeds).
func (g *Gateway) ownName(ctx context.Context) string {
	g.nameMu.Lock()
	defer g.nameMu.Unlock()
	if g.botName == "" {
		if resp, err := g.c.bot.GetOwnDisplayName(ctx); err == nil {
			g.botName = strings.TrimSpace(resp.DisplayName)
		}
	}
	return g.botName
}

// nameOf is a user's display name in a room, else their localpart.
func (g *Gateway) nameOf(ctx context.Context, room, user string) string {
	var m struct {
		DisplayName string `json:"displayname"`
	}
	if err := g.c.bot.StateEvent(ctx, id.RoomID(room), event.StateMember, user, &m); err == nil && strings.TrimSpace(m.DisplayName) != "" {
		return strings.TrimSpace(m.DisplayName)
	}
	local, _, _ := strings.Cut(strings.TrimPrefix(user, "@"), ":")
	return local
}

func (g *Gateway) onEdit(ctx context.Context, in Inbound) {
	if g.d.Changes == nil {
		return
	}
	orig, err := g.c.bot.GetEvent(ctx, id.RoomID(in.RoomID), id.EventID(in.Edits))
	if err != nil {
		g.log.Warn().Err(classify("matrix: edited event", err)).Str("event", in.EventID).Str("edits", in.Edits).Msg("edit not recorded: the edited message could not be read")
		return
	}
	if orig.Sender.String() != in.Sender {
		g.log.Info().Str("event", in.EventID).Str("edits", in.Edits).Str("sender", in.Sender).Msg("edit by someone other than the author ignored")
		return
	}
	// On the edited message's lane: behind that message and what its conversation had before.
	continueOn(ctx, laneKey(in.RoomID, threadRootOf(orig.Content.VeryRaw)), "edit", func(ctx context.Context) { g.edited(ctx, in, orig) })
}

// edited records an author's edit of orig and re-runs or routes its turn.
func (g *Gateway) edited(ctx context.Context, in Inbound, orig *event.Event) {
	ok, err := g.d.Changes.Edit(ctx, in.Edits, in.EventID, in.Body)
	if err != nil {
		g.log.Error().Err(err).Str("event", in.EventID).Str("edits", in.Edits).Msg("record edit")
		return
	}
	if !ok {
		// Unchanged (a replay), or a message no transcript holds: one that now mentions the bot (the edit's own
		// m.mentions names the users it newly mentions) is routed as a new message would be, as on Discord.
		_, _, held, err := g.d.Changes.Locate(ctx, in.Edits)
		if err != nil {
			g.log.Error().Err(err).Str("edits", in.Edits).Msg("look up edited message")
			return
		}
		if held || !in.MentionsBot {
			return
		}
		// The message as it now reads: the original's place (thread, reply) with the edit's text.
		raw, err := json.Marshal(orig)
		if err != nil {
			return
		}
		msg, ok := g.c.class.Classify(raw)
		if !ok || msg.Kind != KindMessage {
			return
		}
		msg.RoomID, msg.Body, msg.MsgType, msg.MentionsBot = in.RoomID, in.Body, in.MsgType, true
		g.route(ctx, msg, true)
		return
	}
	if g.d.Sessions.MessageEdited(in.Edits) {
		g.log.Debug().Str("edits", in.Edits).Msg("edited message's turn runs again on the new text")
	}
}

func (g *Gateway) onRedaction(ctx context.Context, in Inbound) {
	conv, root, ok := g.redactable(ctx, in)
	if !ok {
		return
	}
	// On the redacted message's lane: it waits for that conversation's sends, not the room's, and holds up no other
	// conversation meanwhile.
	continueOn(ctx, laneKey(in.RoomID, root), "redaction", func(ctx context.Context) { g.redacted(ctx, in, conv) })
}

// redacted acts on a redaction that counts of a message shown in conv.
func (g *Gateway) redacted(ctx context.Context, in Inbound, conv binding.ConversationRef) {
	thread := g.ref(in.Redacts, in.RoomID)
	if rec, ok := g.d.Bindings.ResolveByConversation(thread); ok {
		if _, err := g.d.Bindings.Unbind(ctx, binding.UnbindInput{ID: rec.ID, Reason: binding.ReasonThreadDelete}); err != nil {
			g.log.Error().Err(err).Str("binding", rec.ID).Msg("unbind")
		} else {
			g.log.Info().Str("binding", rec.ID).Str("thread", in.Redacts).Str("reason", binding.ReasonThreadDelete).Msg("binding ended: thread root redacted")
		}
	}
	g.d.Sessions.MessageDeletedIn(ctx, conv, in.Redacts) // its turn, if one still runs, posts nothing
	if g.d.Changes == nil {
		return
	}
	// A barrier, not held: a bot message the conversation displays from a send still committing (a reply still
	// streaming) has its entry written before the deletion looks for it.
	_ = g.d.Outbound.WithConversation(conv, func() error { return nil })
	if _, err := g.d.Changes.Delete(ctx, in.Redacts); err != nil {
		g.log.Error().Err(err).Str("event", in.Redacts).Msg("record deletion")
	}
}

// redactable decides whether a redaction counts, and returns the conversation the redacted message was shown in
// and its thread root ("" for none).
// A redaction event names the event it removes in content anyone may write, and (room versions 3+) the homeserver
// hands it to clients whether or not it applied it. So it counts only for an event the homeserver has IN THIS ROOM
// (looked up by room and event id: an event id of another room, or a DM's, is refused), and only from the event's
// author or from someone whose power level reaches the room's redact level.
func (g *Gateway) redactable(ctx context.Context, in Inbound) (binding.ConversationRef, string, bool) {
	lg := g.log.With().Str("event", in.EventID).Str("redacts", in.Redacts).Str("room", in.RoomID).Str("sender", in.Sender).Logger()
	orig, err := g.c.bot.GetEvent(ctx, id.RoomID(in.RoomID), id.EventID(in.Redacts))
	if err != nil {
		if err = classify("matrix: redacted event", err); errors.Is(err, ErrDestinationGone) {
			lg.Warn().Err(err).Msg("redaction ignored: the event is not one of this room")
		} else {
			lg.Error().Err(err).Msg("redaction not recorded: the redacted event could not be read")
		}
		return binding.ConversationRef{}, "", false
	}
	if orig.RoomID.String() != in.RoomID {
		lg.Warn().Str("eventRoom", orig.RoomID.String()).Msg("redaction ignored: the event is not one of this room")
		return binding.ConversationRef{}, "", false
	}
	if orig.Sender.String() != in.Sender {
		var pl event.PowerLevelsEventContent
		if err := g.c.bot.StateEvent(ctx, id.RoomID(in.RoomID), event.StatePowerLevels, "", &pl); err != nil {
			lg.Error().Err(classify("matrix: power levels of "+in.RoomID, err)).Msg("redaction not recorded: the room's power levels could not be read")
			return binding.ConversationRef{}, "", false
		}
		if pl.GetUserLevel(id.UserID(in.Sender)) < pl.Redact() {
			lg.Warn().Msg("redaction ignored: neither the author nor someone with the power to redact in this room")
			return binding.ConversationRef{}, "", false
		}
	}
	// The redacted message's conversation, as it was routed: its (checked) thread, the author's DM, or the room.
	at := Inbound{RoomID: in.RoomID, EventID: in.Redacts, Sender: orig.Sender.String()}
	if raw, err := json.Marshal(orig); err == nil {
		if m, ok := g.c.class.Classify(raw); ok && m.ThreadRoot != "" {
			at.ThreadRoot = m.ThreadRoot
		} else if !ok {
			// Already redacted (content gone) or the bot's own: its relation is read from the raw content.
			at.ThreadRoot = threadRootOf(orig.Content.VeryRaw)
		}
	}
	if root, ok := g.c.known.rootOf(in.RoomID, in.Redacts); ok && at.ThreadRoot == "" {
		at.ThreadRoot = root // the redaction stripped the relation: the thread it was posted or handed in
	}
	conv, err := g.conversationOf(ctx, at)
	if err != nil {
		conv = g.ref(in.RoomID, "") // the deletion is still recorded; no turn of another conversation matches it
	}
	return conv, at.ThreadRoot, true
}

// threadRootOf is the m.thread root named in raw event content ("" for none or one that is no event id).
func threadRootOf(content json.RawMessage) string {
	var c struct {
		RelatesTo *struct {
			RelType string `json:"rel_type"`
			EventID string `json:"event_id"`
		} `json:"m.relates_to"`
	}
	if json.Unmarshal(content, &c) != nil || c.RelatesTo == nil || c.RelatesTo.RelType != "m.thread" || !ValidEventID(c.RelatesTo.EventID) {
		return ""
	}
	return c.RelatesTo.EventID
}

func (g *Gateway) onInvite(ctx context.Context, in Inbound) {
	if in.Sender == "" || !g.d.AcceptInvite(in.RoomID, in.Sender) {
		g.log.Info().Str("room", in.RoomID).Str("inviter", in.Sender).Msg("invite ignored")
		return
	}
	if _, err := g.c.JoinRoom(ctx, in.RoomID); err != nil {
		g.log.Warn().Err(err).Str("room", in.RoomID).Msg("join on invite")
		return
	}
	if in.IsDirect {
		if err := g.c.noteDM(ctx, in.RoomID, in.Sender); err != nil {
			g.log.Error().Err(err).Str("room", in.RoomID).Msg("record DM room")
		}
	}
}
