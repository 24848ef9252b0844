package command

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/scheduler"
)

// Hand-written fakes of the commands' collaborators; each records what it
// was asked so a test can tell which rule was consulted.

type fakeSessions struct {
	infos    []session.Info
	spawnRes session.SpawnResult
	spawnErr error
	spawned  []session.SpawnRequest
	running  map[string]session.Run
	stopOK   bool
	stopped  []session.Run
	resetErr error
	resets   []binding.ConversationRef
}

func (f *fakeSessions) Spawn(_ context.Context, req session.SpawnRequest) (session.SpawnResult, error) {
	f.spawned = append(f.spawned, req)
	return f.spawnRes, f.spawnErr
}

func (f *fakeSessions) Reset(_ context.Context, conv binding.ConversationRef) (string, error) {
	f.resets = append(f.resets, conv)
	return "gen2", f.resetErr
}

func (f *fakeSessions) Sessions(keep func(session.Info) bool) []session.Info {
	var out []session.Info
	for _, in := range f.infos {
		if keep(in) {
			out = append(out, in)
		}
	}
	return out
}

func (f *fakeSessions) Info(key string) (session.Info, bool) {
	for _, in := range f.infos {
		if in.Key == key {
			return in, true
		}
	}
	return session.Info{}, false
}

func (f *fakeSessions) Running(key string) (session.Run, bool) {
	r, ok := f.running[key]
	return r, ok
}

func (f *fakeSessions) Stop(run session.Run) bool {
	f.stopped = append(f.stopped, run)
	return f.stopOK
}

type fakeBindings struct {
	bound    map[string]binding.Record // by conversation key
	binds    []binding.BindInput
	unbinds  []binding.UnbindInput
	timeouts []string // "id idle maxAge"
}

func (f *fakeBindings) ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool) {
	r, ok := f.bound[ref.Key()]
	return r, ok
}

func (f *fakeBindings) Bind(_ context.Context, in binding.BindInput) (binding.Record, error) {
	f.binds = append(f.binds, in)
	return binding.Record{ID: "b-new", TargetSessionKey: in.TargetSessionKey, Conversation: in.Conversation}, nil
}

func (f *fakeBindings) Unbind(_ context.Context, in binding.UnbindInput) ([]binding.Record, error) {
	f.unbinds = append(f.unbinds, in)
	return nil, nil
}

func (f *fakeBindings) ListBySession(key string) []binding.Record {
	var out []binding.Record
	for _, r := range f.bound {
		if r.TargetSessionKey == key {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeBindings) SetTimeouts(_ context.Context, id string, idle, maxAge *time.Duration) (binding.Record, error) {
	f.timeouts = append(f.timeouts, fmt.Sprintf("%s %v %v", id, deref(idle), deref(maxAge)))
	return binding.Record{ID: id}, nil
}

func deref(d *time.Duration) string {
	if d == nil {
		return "-"
	}
	return d.String()
}

type fakeRoutes struct {
	key   string
	bound bool
}

func (f fakeRoutes) SessionFor(binding.ConversationRef) (string, binding.Record, bool) {
	return f.key, binding.Record{}, f.bound
}

type fakeThreads struct {
	thread  binding.ConversationRef
	names   []string
	created []binding.ConversationRef
}

func (f *fakeThreads) CreateThread(_ context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error) {
	f.names = append(f.names, name)
	f.created = append(f.created, parent)
	return f.thread, nil
}

// fakeAuthority: operators are listed; MayStop refuses a run someone else
// owns; MayFocus refuses what refuseFocus names ("*": everything). asked records each question.
type fakeAuthority struct {
	operators   map[string]bool
	refuseFocus string
	asked       []string
	// targets are the conversations asked about, in order.
	targets []string
}

func (f *fakeAuthority) Operator(_ context.Context, a authz.Actor, target binding.ConversationRef) bool {
	f.asked = append(f.asked, "operator "+a.UserID)
	f.targets = append(f.targets, target.ConversationID)
	return f.operators[a.UserID]
}

func (f *fakeAuthority) MayStop(_ context.Context, a authz.Actor, owner string, target binding.ConversationRef, what string) error {
	f.asked = append(f.asked, "stop "+a.UserID+" "+owner)
	f.targets = append(f.targets, target.ConversationID)
	if owner != a.UserID && !f.operators[a.UserID] {
		return &authz.Refusal{Msg: "only its owner or an operator can stop " + what}
	}
	return nil
}

func (f *fakeAuthority) MayFocus(_ context.Context, a authz.Actor, t authz.FocusTarget) error {
	f.asked = append(f.asked, "focus "+a.UserID+" "+t.Key)
	if t.Key == f.refuseFocus || f.refuseFocus == "*" {
		return &authz.Refusal{Msg: "you cannot view " + t.Key}
	}
	return nil
}

// fakeJobs: operators (by user id) may add, remove and run; err, when set,
// is what every call returns.
type fakeJobs struct {
	operators map[string]bool
	jobs      []scheduler.Job
	runs      []scheduler.Run
	err       error
	added     []CronAdd
}

func (f *fakeJobs) refuse(a authz.Actor, what string) error {
	if f.err != nil {
		return f.err
	}
	if !f.operators[a.UserID] {
		return &authz.Refusal{Msg: "only an operator can " + what}
	}
	return nil
}

func (f *fakeJobs) Add(_ context.Context, a authz.Actor, req CronAdd) (scheduler.Job, error) {
	if err := f.refuse(a, "schedule jobs"); err != nil {
		return scheduler.Job{}, err
	}
	f.added = append(f.added, req)
	return scheduler.Job{ID: "j1", StoredMode: scheduler.ModeInChat}, nil
}

func (f *fakeJobs) List(context.Context, authz.Actor) ([]scheduler.Job, error) { return f.jobs, f.err }

// Operable: every job for an operator, none for anyone else.
func (f *fakeJobs) Operable(_ context.Context, a authz.Actor) ([]scheduler.Job, error) {
	if f.refuse(a, "") != nil {
		return nil, f.err
	}
	return f.jobs, f.err
}

func (f *fakeJobs) Remove(_ context.Context, a authz.Actor, _ string) error {
	return f.refuse(a, "remove jobs")
}

func (f *fakeJobs) RunNow(_ context.Context, a authz.Actor, _ string) (scheduler.Run, error) {
	if err := f.refuse(a, "run jobs"); err != nil {
		return scheduler.Run{}, err
	}
	return scheduler.Run{Status: "ok", Delivery: scheduler.RunDelivery{Status: "delivered"}}, nil
}

func (f *fakeJobs) Runs(context.Context, authz.Actor, string) ([]scheduler.Run, error) {
	return f.runs, f.err
}

func (f *fakeJobs) Describe(j scheduler.Job) string { return "every 10m in this chat" }

type fakeACP struct {
	names    map[string]bool
	res      ACPStarted
	startErr error
	starts   []ACPStart
	stopText string
	stopErr  error
	psText   string
}

func (f *fakeACP) Has(name string) bool { return f.names[name] }

// Startable: every agent for an operator, none for anyone else.
func (f *fakeACP) Startable(_ context.Context, a authz.Actor) []string {
	if a.UserID != "op" {
		return nil
	}
	return slices.Sorted(maps.Keys(f.names))
}

func (f *fakeACP) Start(_ context.Context, req ACPStart) (ACPStarted, error) {
	f.starts = append(f.starts, req)
	return f.res, f.startErr
}

func (f *fakeACP) Stop(context.Context, binding.Record, string) (string, error) {
	return f.stopText, f.stopErr
}

func (f *fakeACP) Processes(context.Context, binding.Record) (string, error) { return f.psText, nil }

// world is one Commands over fresh fakes.
type world struct {
	sessions *fakeSessions
	bindings *fakeBindings
	threads  *fakeThreads
	auth     *fakeAuthority
	jobs     *fakeJobs
	acp      *fakeACP
	routes   fakeRoutes
	agents   Agents // nil: /agents does not say who answers
	noJobs   bool
	noACP    bool
}

func newWorld() *world {
	return &world{
		sessions: &fakeSessions{running: map[string]session.Run{}},
		bindings: &fakeBindings{bound: map[string]binding.Record{}},
		threads:  &fakeThreads{thread: ref("thread-9", "chan-1")},
		auth:     &fakeAuthority{operators: map[string]bool{"op": true}},
		jobs:     &fakeJobs{operators: map[string]bool{"op": true}},
		acp:      &fakeACP{names: map[string]bool{"coder": true}},
		routes:   fakeRoutes{key: "agent:main:test:channel:chan-1"},
	}
}

func (w *world) commands() *Commands {
	d := Deps{Sessions: w.sessions, Bindings: w.bindings, Outbound: w.routes, Threads: w.threads, Authority: w.auth, Jobs: w.jobs, ACP: w.acp}
	if w.noJobs {
		d.Jobs = nil
	}
	if w.noACP {
		d.ACP = nil
	}
	d.Agents = w.agents
	return New(Options{Agents: []AgentChoice{{ID: "main", Name: "Assistant"}, {ID: "scribe", Name: "Scribe"}}}, d)
}

func ref(id, parent string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "test", AccountID: "default", ConversationID: id, ParentConversationID: parent}
}

// discordWords is discord.CommandPlatform(true), restated on purpose: the
// expected Discord texts below must not follow a change of the adapter's
// platform (core imports no adapter; adapter/discord's TestCommandPlatform
// pins the same fragments there).
var discordWords = Platform{
	Name: "Discord", Prefix: "/",
	Option: func(name, value string) string {
		sep := ":"
		if strings.Contains(value, " ") { // a value of several words reads "name: value"
			sep = ": "
		}
		return name + sep + value
	},
	Mention:               func(id string) string { return "<@" + id + ">" },
	Link:                  func(c binding.ConversationRef) string { return "<#" + c.ConversationID + ">" },
	SharedPlace:           "a server channel or thread",
	ThreadPermissions:     "Create Public Threads and Send Messages in Threads in this channel",
	ThreadBindings:        true,
	ThreadBindingsSetting: "discord.threadBindings.enabled",
}

// matrixWords is a platform written like Matrix's (adapter/matrix pins its own).
var matrixWords = Platform{
	Name: "Matrix", Prefix: "!",
	Link:              func(c binding.ConversationRef) string { return "https://matrix.to/#/" + c.ConversationID },
	SharedPlace:       "a room or a thread",
	ThreadPermissions: "the power to send messages in this room",
	ThreadBindings:    true, ThreadBindingsSetting: "matrix.threadBindings.enabled",
}

var errInternal = errors.New("store: disk on fire at /var/lib/agentbot")
