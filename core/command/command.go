package command

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/agentroute"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/usertext"
)

// Sessions is what the commands need of core/session.Manager.
type Sessions interface {
	Spawn(ctx context.Context, req session.SpawnRequest) (session.SpawnResult, error)
	Reset(ctx context.Context, conv binding.ConversationRef) (string, error)
	Sessions(keep func(session.Info) bool) []session.Info
	Info(key string) (session.Info, bool)
	Running(key string) (session.Run, bool)
	Stop(run session.Run) bool
}

// Bindings is what the commands need of core/binding.Service.
type Bindings interface {
	ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool)
	Bind(ctx context.Context, in binding.BindInput) (binding.Record, error)
	Unbind(ctx context.Context, in binding.UnbindInput) ([]binding.Record, error)
	ListBySession(key string) []binding.Record
	SetTimeouts(ctx context.Context, id string, idle, maxAge *time.Duration) (binding.Record, error)
}

// Routes says which session a conversation routes to (core/delivery.Outbound's
// SessionFor: the one mapping inbound and outbound share, invariant 10).
type Routes interface {
	SessionFor(ref binding.ConversationRef) (string, binding.Record, bool)
}

// Agents says which agent answers in a conversation and why
// (core/agentroute.Table, agents[].channels).
type Agents interface {
	Resolve(ref binding.ConversationRef) agentroute.Route
}

// Threads creates the thread /focus binds when run in a channel, on the
// conversation's platform.
type Threads interface {
	CreateThread(ctx context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error)
}

// Authority is the one authority rule (core/authz.Authority, invariant 13):
// the model's tools ask the same.
type Authority interface {
	// Operator answers for a target conversation (its server's operators,
	// or the configured operator users; nobody else's for a DM).
	Operator(ctx context.Context, actor authz.Actor, target binding.ConversationRef) bool
	MayStop(ctx context.Context, actor authz.Actor, owner string, target binding.ConversationRef, what string) error
	MayFocus(ctx context.Context, actor authz.Actor, t authz.FocusTarget) error
}

// Options configure the commands; what differs between platforms comes
// with each Invocation (its Platform).
type Options struct {
	// Agents are the configured agents (agents[]), the default first:
	// what /spawn agent completes to.
	Agents []AgentChoice
}

// Deps are the commands' collaborators. Jobs and ACP may be nil (scheduler
// off, no external agents); Threads is needed only with thread bindings.
type Deps struct {
	Sessions  Sessions
	Bindings  Bindings
	Outbound  Routes
	Threads   Threads
	Authority Authority
	Jobs      Jobs
	ACP       ACP
	// Agents, if set, lets /agents say which agent answers here and why.
	Agents Agents
	// Once makes a command event run at most once (nil: no dedupe).
	Once Once
	// Usage and Places answer /usage (nil Usage: not available).
	Usage  Usage
	Places Places
	Clock  clock.Clock // nil: the real clock
	// Memory is recall for /memory search (nil: memory is off).
	Memory Memory
	// Notes are memory's notes for /memory list and forget (nil: off).
	Notes Notes
}

// Once is a durable record of the command events already run: a platform
// that hands an event again after a crash (Matrix /sync is at-least-once)
// must not run its command twice (a second !spawn, a second job).
type Once interface {
	// Claim records key and reports whether it was new. It is durable
	// before it returns: the command's effect comes after it.
	Claim(ctx context.Context, key string) (bool, error)
}

// ErrAlreadyRun: the invocation's event was run before (Invocation.EventID
// claimed by an earlier run, in this process or a previous one). Its reply,
// if it had one, was given then; the adapter stays silent.
var ErrAlreadyRun = errors.New("command: this command event was already run")

// Commands runs the chat commands for every platform's adapter.
type Commands struct {
	opt Options
	d   Deps
}

// New returns the commands over d. It does no I/O.
func New(opt Options, d Deps) *Commands { return &Commands{opt: opt, d: d} }

// Invocation is one command call, as its adapter parsed it.
type Invocation struct {
	// Platform is how the invoker's chat speaks (syntax, markup, settings).
	Platform Platform
	// Conversation is where the command ran; UserID who ran it.
	Conversation binding.ConversationRef
	UserID       string
	// EventID is the platform's id of the event that carried the command
	// (a Matrix event id), "" when the platform never hands one twice: a
	// command with one runs at most once (Deps.Once), claimed before it acts.
	EventID string
	// Name and Sub are the command and its sub-command ("cron", "list").
	Name, Sub string
	// Options are the options given, by name: string, bool or int64 values
	// (a value of another type reads as absent).
	Options map[string]any
	// Admit applies the platform's access policy to a command that starts
	// model work (/spawn of a subagent) for a caller who is no operator: ""
	// admits, anything else is the refusal shown. nil admits.
	Admit func(ctx context.Context) string
}

// Str is a string option's value, trimmed ("" when absent or not a string).
func (v Invocation) Str(name string) string {
	s, _ := v.Options[name].(string)
	return strings.TrimSpace(s)
}

// Bool is a boolean option's value, nil when absent or not a bool.
func (v Invocation) Bool(name string) *bool {
	if b, ok := v.Options[name].(bool); ok {
		return &b
	}
	return nil
}

// Int is an integer option's value, false when absent or not an int64.
func (v Invocation) Int(name string) (int64, bool) {
	n, ok := v.Options[name].(int64)
	return n, ok
}

func (v Invocation) actor() authz.Actor { return authz.Actor{UserID: v.UserID, Where: v.Conversation} }

// Reply is a command's answer. Public answers are displayed to everyone and
// so go through Outbound into the chat's transcript; the others are shown to
// the invoker only (Discord: ephemeral) and belong to no transcript.
type Reply struct {
	Text   string
	Public bool
}

// Run runs one command. An error is user-facing (it implements
// UserMessage() string with the final text) or internal; usertext.ForChat
// says what the boundary shows for either.
func (c *Commands) Run(ctx context.Context, v Invocation) (Reply, error) {
	if v.EventID != "" && c.d.Once != nil {
		first, err := c.d.Once.Claim(ctx, "cmdrun:"+strings.ToLower(v.Platform.Name)+":"+v.EventID)
		if err != nil {
			return Reply{}, fmt.Errorf("command %s: claim event %s: %w", v.Name, v.EventID, err)
		}
		if !first {
			return Reply{}, ErrAlreadyRun
		}
	}
	r, err := c.run(ctx, v)
	if err != nil {
		return Reply{}, rendered(err, v.Platform)
	}
	return r, nil
}

func (c *Commands) run(ctx context.Context, v Invocation) (Reply, error) {
	switch v.Name {
	case "spawn":
		return c.spawn(ctx, v)
	case "focus":
		return c.focus(ctx, v)
	case "unfocus":
		return c.unbind(ctx, v, "unfocus")
	case "agents":
		return c.agents(v), nil
	case "session":
		return c.session(ctx, v)
	case "cron":
		return c.cron(ctx, v)
	case "stop":
		return c.stop(ctx, v)
	case "usage":
		return c.usage(ctx, v)
	case "memory":
		return c.memory(ctx, v)
	case "help":
		return c.help(ctx, v), nil
	case "ps":
		return c.ps(ctx, v)
	case "reset":
		if _, err := c.d.Sessions.Reset(ctx, v.Conversation); err != nil {
			return Reply{}, fmt.Errorf("reset: %w", err)
		}
		return Reply{Text: "🧹 Started a new conversation here. Earlier messages stay in the record but are no longer in my context.", Public: true}, nil
	}
	return Reply{}, userErrf("Unknown command %s.", v.Platform.Command(v.Name))
}

func (c *Commands) now() time.Time {
	if c.d.Clock == nil {
		return time.Now()
	}
	return c.d.Clock.Now()
}

// userError is a command failure whose message is meant for the user; err,
// if any, is what it was made from.
type userError struct {
	msg string
	err error
}

func (e *userError) Error() string { return e.msg }

// UserMessage implements usertext.UserFacing.
func (e *userError) UserMessage() string { return e.msg }

func (e *userError) Unwrap() error { return e.err }

func userErrf(format string, args ...any) error { return &userError{msg: fmt.Sprintf(format, args...)} }

// rendered gives a user-facing error with a scheduler hint its text for p
// (the hint as p's command); other errors are returned as they are.
func rendered(err error, p Platform) error {
	var uf usertext.UserFacing
	if !errors.As(err, &uf) {
		return err
	}
	if h, ok := uf.(usertext.Hinted); ok {
		return &userError{msg: h.Render(p.JobCommand), err: err}
	}
	return err
}

// Refusal is an authority refusal as a sentence for the user.
func Refusal(err error) string {
	msg := err.Error()
	if r := []rune(msg); len(r) > 0 {
		msg = strings.ToUpper(string(r[0])) + string(r[1:])
	}
	return msg + "."
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
