package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// Refusal is a decision against the caller; Msg is meant for the user (and
// for the model, which tells the user). errors.As finds it.
type Refusal struct{ Msg string }

func (r *Refusal) Error() string { return r.Msg }

func refuse(format string, args ...any) error { return &Refusal{Msg: fmt.Sprintf(format, args...)} }

// IsRefusal reports whether err is (or wraps) a Refusal.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// Access is what a user and the bot may do in one conversation, computed by
// the platform's permission model (for Discord: guild roles, @everyone,
// channel overwrites, a thread's parent's overwrites, administrator, owner).
type Access struct {
	// Exists is false when the conversation is unknown (deleted, or never existed).
	Exists bool
	// UserView: the user can see the conversation; UserSend: and post in it
	// (Send Messages in a channel, Send Messages in Threads in a thread).
	UserView, UserSend bool
	// BotView, BotSend: the same for the bot itself.
	BotView, BotSend bool
	// Name is a short name for messages (e.g. "#general"); may be empty.
	Name string
}

// Member is a user's standing in the guild a conversation belongs to.
type Member struct {
	Roles []string
	// ManageGuild: the member holds Manage Server (or Administrator, or owns the guild).
	ManageGuild bool
}

// Directory answers platform questions; the adapter implements it from its
// gateway cache, fetching over REST what is not cached. Errors are
// transient lookups failures (the caller refuses, saying so).
type Directory interface {
	// Access computes what userID and the bot may do in a guild
	// conversation (a channel or thread id; not a DM).
	Access(ctx context.Context, userID string, conv binding.ConversationRef) (Access, error)
	// Member returns userID's roles in the guild of a guild conversation;
	// ok is false when the user is not a member (or conv is a DM).
	Member(ctx context.Context, userID string, conv binding.ConversationRef) (m Member, ok bool, err error)
}

// Config is who the operators are. Both empty: members with Manage Server
// in the guild they act in.
type Config struct {
	OperatorUsers []string
	OperatorRoles []string
}

// Authority decides. Safe for concurrent use.
type Authority struct {
	users map[string]bool
	roles map[string]bool
	dir   Directory
}

// New returns an authority over dir.
func New(cfg Config, dir Directory) *Authority {
	a := &Authority{users: map[string]bool{}, roles: map[string]bool{}, dir: dir}
	for _, u := range cfg.OperatorUsers {
		a.users[u] = true
	}
	for _, r := range cfg.OperatorRoles {
		a.roles[r] = true
	}
	return a
}

// Actor is who is acting and where: a user in a conversation (a slash
// command's invoker, or the user whose message started a turn; for a job
// run its creator in the job's conversation; for a subagent its spawner).
// An empty UserID is nobody: every authority-requiring action is refused.
type Actor struct {
	UserID string
	Where  binding.ConversationRef
}

// IsDM reports whether conv is a direct-message conversation.
func IsDM(conv binding.ConversationRef) bool {
	return strings.HasPrefix(conv.ConversationID, sessionkey.DMPrefix)
}

// DMUser is the user whose direct messages conv is, "" when it is no DM.
func DMUser(conv binding.ConversationRef) string {
	if !IsDM(conv) {
		return ""
	}
	return dmUser(conv)
}

// dmUser is the user of a DM conversation.
func dmUser(conv binding.ConversationRef) string {
	return strings.TrimPrefix(conv.ConversationID, sessionkey.DMPrefix)
}

// Global reports whether userID is a configured operator user
// (operators.users): the only operators whose power crosses servers, and
// the only ones with power over the host (MayUseAgent, Grant.Operators).
func (a *Authority) Global(userID string) bool { return userID != "" && a.users[userID] }

// Operator reports whether the actor is an operator OF target (a
// conversation: a job's, a session's or binding's, a run's; invariant 13,
// "power has a scope"):
//   - a configured operator user (operators.users) is an operator of every
//     server's conversations;
//   - a member holding a configured operator role, or, when no operators
//     are configured, Manage Server (Matrix: the power to change power
//     levels), IN THE TARGET'S guild (room) is an operator of that guild's
//     conversations only: where the actor acts does not matter;
//   - a DM belongs to its user alone: nobody else is its operator,
//     configured operators included; its own user is only if configured;
//   - no target (an empty conversation id): configured operators only.
//
// A failed lookup is not an operator (fail closed).
func (a *Authority) Operator(ctx context.Context, actor Actor, target binding.ConversationRef) bool {
	if actor.UserID == "" {
		return false
	}
	if IsDM(target) {
		return dmUser(target) == actor.UserID && a.Global(actor.UserID)
	}
	if a.Global(actor.UserID) {
		return true
	}
	if target.ConversationID == "" || a.dir == nil {
		return false
	}
	m, ok, err := a.dir.Member(ctx, actor.UserID, target)
	if err != nil || !ok {
		return false
	}
	for _, r := range m.Roles {
		if a.roles[r] {
			return true
		}
	}
	return len(a.users) == 0 && len(a.roles) == 0 && m.ManageGuild
}

// RequireOperator refuses unless the actor is an operator of target;
// what names the action ("/cron add").
func (a *Authority) RequireOperator(ctx context.Context, actor Actor, target binding.ConversationRef, what string) error {
	if actor.UserID == "" {
		return refuse("%s needs an operator, and this was not started by a user", what)
	}
	if IsDM(target) && dmUser(target) != actor.UserID {
		return refuse("only user:%s can %s: it concerns their direct messages, which nobody else reaches through the bot", dmUser(target), what)
	}
	if IsDM(target) && !a.Operator(ctx, actor, target) {
		return refuse("only the bot's configured operators (operators.users) can %s in direct messages", what)
	}
	if !a.Operator(ctx, actor, target) {
		return refuse("only operators of that conversation's server can %s (an operator of another server is not; configure operators.users for the bot's own operators)", what)
	}
	return nil
}

// CanView refuses unless userID can see conv: their own DM, or a guild
// conversation Discord's permissions let them view.
func (a *Authority) CanView(ctx context.Context, userID string, conv binding.ConversationRef) error {
	_, err := a.check(ctx, userID, conv, false)
	return err
}

// CanPost refuses unless userID can view and send messages in conv and the
// bot can too (a DM: only the user's own).
func (a *Authority) CanPost(ctx context.Context, userID string, conv binding.ConversationRef) error {
	_, err := a.check(ctx, userID, conv, true)
	return err
}

func (a *Authority) check(ctx context.Context, userID string, conv binding.ConversationRef, send bool) (Access, error) {
	if userID == "" {
		return Access{}, refuse("no user's authority stands behind this request")
	}
	if conv.ConversationID == "" {
		return Access{}, refuse("no conversation named")
	}
	if IsDM(conv) {
		if dmUser(conv) != userID {
			return Access{}, refuse("user:%s is someone else's direct messages; only they can be sent to there", dmUser(conv))
		}
		return Access{Exists: true, UserView: true, UserSend: true, BotView: true, BotSend: true}, nil
	}
	if a.dir == nil {
		return Access{}, refuse("permissions cannot be checked here")
	}
	acc, err := a.dir.Access(ctx, userID, conv)
	if errors.Is(err, ErrNoDirectory) {
		return Access{}, refuse("permissions in %s conversations cannot be checked here, so nothing is done there for this request", conv.Normalize().Channel)
	}
	if err != nil {
		return Access{}, refuse("could not check permissions in channel %s right now; try again", conv.ConversationID)
	}
	name := acc.Name
	if name == "" {
		name = "channel " + conv.ConversationID
	}
	switch {
	case !acc.Exists:
		return acc, refuse("channel %s does not exist (or the bot is not in its server)", conv.ConversationID)
	case !acc.UserView:
		return acc, refuse("the requesting user cannot view %s", name)
	case send && !acc.UserSend:
		return acc, refuse("the requesting user may not send messages in %s", name)
	case send && (!acc.BotView || !acc.BotSend):
		return acc, refuse("the bot itself may not send messages in %s (it needs View Channel and Send Messages there)", name)
	}
	return acc, nil
}

// FocusTarget is what /focus would bind to, as the session registry knows it.
type FocusTarget struct {
	Key string
	// Kind: "main" (a conversation's own session), "subagent", or another kind.
	Kind string
	// Conversation is a main session's conversation, a subagent's
	// requester: the target whose operators may focus it.
	Conversation binding.ConversationRef
	// SpawnedBy is a subagent's spawner.
	SpawnedBy string
}

// MayFocus: a user may bind a conversation to their own DM's session, a
// subagent they spawned, or the session of a conversation they can view;
// anything else needs an operator of the target's conversation (none for
// someone else's DM).
func (a *Authority) MayFocus(ctx context.Context, actor Actor, t FocusTarget) error {
	if actor.UserID == "" {
		return refuse("no user's authority stands behind this request")
	}
	allowed := false
	switch t.Kind {
	case "subagent":
		allowed = t.SpawnedBy != "" && t.SpawnedBy == actor.UserID
	case "main":
		allowed = t.Conversation.ConversationID != "" && a.CanView(ctx, actor.UserID, t.Conversation) == nil
	}
	if allowed || a.Operator(ctx, actor, t.Conversation) {
		return nil
	}
	if IsDM(t.Conversation) && dmUser(t.Conversation) != actor.UserID {
		return refuse("you may not focus %s: it belongs to user:%s's direct messages, which nobody else reaches through the bot", t.Key, dmUser(t.Conversation))
	}
	return refuse("you may not focus %s: only your own DM, subagents you spawned and conversations you can view (anything else needs an operator of its server)", t.Key)
}

// MayStop: a user may stop their own run (a turn their message started, a
// subagent they spawned, a job they created); anything else, including a
// system run, needs an operator of the run's conversation (target). what
// names the run for the refusal.
func (a *Authority) MayStop(ctx context.Context, actor Actor, owner string, target binding.ConversationRef, what string) error {
	if actor.UserID == "" {
		return refuse("no user's authority stands behind this request")
	}
	if owner != "" && owner == actor.UserID {
		return nil
	}
	if a.Operator(ctx, actor, target) {
		return nil
	}
	return refuse("you may not stop %s: it is someone else's, and stopping another user's run needs an operator of its server", what)
}

// Grant is who may use a resource (an MCP server's tools): the listed
// users, members holding a listed role in the guild they act in, and, with
// Operators, the configured operator users (operators.users): a server's
// Manage Server or operator role never grants power over the host. An empty
// Grant (no users, no roles, not operators-only) is everyone.
type Grant struct {
	Users, Roles []string
	Operators    bool
}

// Open reports whether g lets everyone in.
func (g Grant) Open() bool { return len(g.Users) == 0 && len(g.Roles) == 0 && !g.Operators }

// Permits refuses unless the actor may use what g guards; what names it for
// the refusal ("the files tools"). A failed role lookup refuses (fail closed).
func (a *Authority) Permits(ctx context.Context, actor Actor, g Grant, what string) error {
	if g.Open() {
		return nil
	}
	if actor.UserID == "" {
		return refuse("%s need a user's authority, and this was not started by a user", what)
	}
	if a.listed(ctx, actor, g.Users, g.Roles) || (g.Operators && a.Global(actor.UserID)) {
		return nil
	}
	return refuse("you may not use %s (its users and roles, and the bot's configured operator users, only: a server's own operators are not)", what)
}

// MayUseAgent is who may start an external (ACP) agent and approve its
// actions, i.e. act on the bot's host: the configured operator users
// (operators.users), and the users and roles its config lists (both empty
// = configured operator users only). A server's Manage Server or operator
// role never grants it. Roles are the member's roles in the
// conversation's guild.
func (a *Authority) MayUseAgent(ctx context.Context, actor Actor, users, roles []string, what string) error {
	if actor.UserID == "" {
		return refuse("%s needs a user's authority, and none stands behind this request", what)
	}
	if a.Global(actor.UserID) || a.listed(ctx, actor, users, roles) {
		return nil
	}
	if len(users) == 0 && len(roles) == 0 {
		return refuse("only the bot's configured operator users can %s (it acts on the bot's host; a server's own operators cannot)", what)
	}
	return refuse("only the bot's configured operator users and the users and roles its configuration lists can %s", what)
}

// listed reports whether the actor is one of users or holds one of roles
// in the guild it acts in (never in a DM; a failed lookup is not listed).
func (a *Authority) listed(ctx context.Context, actor Actor, users, roles []string) bool {
	if slices.Contains(users, actor.UserID) {
		return true
	}
	if len(roles) == 0 || IsDM(actor.Where) || actor.Where.ConversationID == "" || a.dir == nil {
		return false
	}
	m, ok, err := a.dir.Member(ctx, actor.UserID, actor.Where)
	if err != nil || !ok {
		return false
	}
	return slices.ContainsFunc(m.Roles, func(r string) bool { return slices.Contains(roles, r) })
}
