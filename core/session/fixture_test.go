package session_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/store/memory"
)

// fakeSender "displays" deliveries: it hands out increasing message ids,
// records every successful send, and fails sends to chosen conversations.
type fakeSender struct {
	mu   sync.Mutex
	next int
	sent []delivery.Delivery
	ids  map[string][]string // delivery id -> message ids
	fail map[string]error    // conversation id -> error
}

func (f *fakeSender) Send(_ context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[d.Target.ConversationID]; err != nil {
		return delivery.Receipt{}, err
	}
	if ids, ok := f.ids[d.ID]; ok {
		return delivery.Receipt{MessageIDs: ids, Duplicate: true}, nil
	}
	f.next++
	ids := []string{strconv.Itoa(5000 + f.next)}
	f.ids[d.ID] = ids
	f.sent = append(f.sent, d)
	return delivery.Receipt{MessageIDs: ids}, nil
}

func (f *fakeSender) failTo(conv string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[conv] = err
}

// to returns the deliveries displayed in a conversation, in order.
func (f *fakeSender) to(conv string) []delivery.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []delivery.Delivery
	for _, d := range f.sent {
		if d.Target.ConversationID == conv {
			out = append(out, d)
		}
	}
	return out
}

func (f *fakeSender) idOf(deliveryID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids[deliveryID][0]
}

// fakeThreads creates threads t1, t2, ... and records the parents asked for.
type fakeThreads struct {
	mu      sync.Mutex
	n       int
	parents []string
	refs    []binding.ConversationRef // the parents asked for, whole
	// block, if set, is received from before a thread is created.
	block   chan struct{}
	entered chan struct{}
}

func (f *fakeThreads) CreateThread(_ context.Context, parent binding.ConversationRef, _ string) (binding.ConversationRef, error) {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.parents = append(f.parents, parent.ConversationID)
	f.refs = append(f.refs, parent)
	return binding.ConversationRef{Channel: parent.Channel, AccountID: parent.AccountID, ConversationID: fmt.Sprintf("t%d", f.n), ParentConversationID: parent.ConversationID}, nil
}

// gate is a provider that blocks each call until released and records
// whether two calls ever overlapped.
type gate struct {
	inner   model.Provider
	entered chan model.Request
	release chan struct{}

	mu             sync.Mutex
	active, maxAct int
}

func newGate(inner model.Provider) *gate {
	return &gate{inner: inner, entered: make(chan model.Request, 16), release: make(chan struct{}, 16)}
}

func (g *gate) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	g.mu.Lock()
	g.active++
	g.maxAct = max(g.maxAct, g.active)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.active--; g.mu.Unlock() }()
	g.entered <- req
	select {
	case <-g.release:
	case <-ctx.Done():
		return model.Response{}, model.NewError("gate", 0, ctx.Err())
	}
	return g.inner.Complete(ctx, req)
}

func (g *gate) waitEntered(t *testing.T) model.Request {
	t.Helper()
	select {
	case r := <-g.entered:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("provider was not called")
	}
	return model.Request{}
}

type fixture struct {
	t        *testing.T
	m        *session.Manager
	sender   *fakeSender
	threads  *fakeThreads
	store    *memory.Store
	reg      *memory.Sessions
	tr       *transcript.Service
	bindings *binding.Service
	out      *delivery.Outbound
	clk      *clock.Fake
}

type fixtureOptions struct {
	provider      model.Provider
	opts          session.Options
	maxToolSteps  int
	noThreads     bool
	threads       *fakeThreads
	threadsImpl   session.Threads // overrides threads
	registry      *memory.Sessions
	regStore      session.Store // overrides registry as the manager's store
	threadsOff    bool
	spawnSessions bool
	turns         session.TurnLocker
	authority     session.Authority // nil: fakeAuthority{} (everything allowed)
	typist        session.Typist
	fetcher       session.Fetcher
	vision        bool
	after         session.After
	toolbox       session.Toolbox
	jobs          session.Jobs // nil: no job tools
	// recoverCompletions: Outbound.Recover hands completions to the
	// manager's live path (as the application wires it).
	recoverCompletions bool
	stream             bool // the agent streams its replies (models.<name>.stream)
	// live: the sender shows live messages (delivery.LiveSender).
	live bool
	// instantPacing: a streamed reply's paced edits wait no real time; the
	// wait moves the fixture's fake clock instead (the pump's pacing reads
	// that clock: an instant wait that left it still would spin forever).
	instantPacing bool
	// budget is the users' turn budget (nil: none).
	budget session.Budget
	// usage is usage accounting and budgets (nil: none); clock, if set,
	// is the fixture's clock (shared with usage's meter).
	usage  session.Meter
	clock  *clock.Fake
	footer bool
	// store, if set, is the store (outbox, transcripts) instead of a new
	// one: a second fixture on the first's store is the bot after a restart.
	store *memory.Store
	// agents are configured after main; routes says which answers where
	// (nil: main everywhere).
	agents []session.Agent
	routes delivery.Agents
	// external takes the messages of ACP-bound conversations (nil: none);
	// lookups, if set, counts the manager's route lookups (SessionFor).
	external session.External
	lookups  *atomic.Int64
}

// countingOutbound counts the route lookups the manager asks of the send
// owner: each is a binding lookup.
type countingOutbound struct {
	*delivery.Outbound
	n *atomic.Int64
}

func (c countingOutbound) SessionFor(ref binding.ConversationRef) (string, binding.Record, bool) {
	c.n.Add(1)
	return c.Outbound.SessionFor(ref)
}

// fakeAuthority refuses posting into the conversations in deny (by id) and
// records who asked.
type fakeAuthority struct {
	mu    sync.Mutex
	deny  map[string]bool
	asked []string // "user>conversation"
}

func (a *fakeAuthority) CanPost(_ context.Context, userID string, conv binding.ConversationRef) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, userID+">"+conv.ConversationID)
	if a.deny[conv.ConversationID] || userID == "" {
		return &authz.Refusal{Msg: "the requesting user cannot view channel " + conv.ConversationID}
	}
	return nil
}

func (a *fakeAuthority) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.asked)
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	if o.provider == nil {
		o.provider = echo.New()
	}
	if o.maxToolSteps == 0 {
		o.maxToolSteps = 4
	}
	if o.threads == nil {
		o.threads = &fakeThreads{}
	}
	if o.registry == nil {
		o.registry = memory.NewSessions()
	}
	clk := o.clock
	if clk == nil {
		clk = clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	}
	st := o.store
	if st == nil {
		st = memory.New()
	}
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clk})
	var m *session.Manager // built below, over bs: bs tells it of ended bindings
	bs := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clk, Log: zerolog.Nop(),
		OnEnded: func(r binding.Record) { m.OnBindingEnded(r) }})
	sender := &fakeSender{ids: map[string][]string{}, fail: map[string]error{}}
	var snd delivery.Sender = sender
	if o.live {
		snd = &liveSender{fakeSender: sender, at: map[string]int{}}
	}
	var recover map[transcript.Source]delivery.RecoverFunc
	if o.recoverCompletions {
		recover = map[transcript.Source]delivery.RecoverFunc{transcript.SourceAnnounce: func(ctx context.Context, r delivery.Record) (bool, error) {
			return m.RecoverCompletion(ctx, r)
		}}
	}
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: snd, Outbox: st, Transcripts: tr, Bindings: bs, Agents: o.routes, Clock: clk, Log: zerolog.Nop(),
		Recover: recover})
	opt := o.opts
	opt.AccountID = "default"
	if o.instantPacing {
		opt.LiveAfter = func(d time.Duration) <-chan time.Time {
			c := make(chan time.Time, 1)
			c <- clk.Advance(d)
			return c
		}
	}
	opt.Agents = []session.Agent{{ID: "main", Name: "Assistant", SystemPrompt: "You are helpful.", Provider: o.provider, MaxHistory: 50, MaxToolSteps: o.maxToolSteps, Vision: o.vision, Stream: o.stream,
		Model: "default", Footer: o.footer}}
	for _, a := range o.agents {
		a.Provider, a.MaxHistory, a.MaxToolSteps = o.provider, 50, o.maxToolSteps
		opt.Agents = append(opt.Agents, a)
	}
	opt.ThreadBindings = !o.threadsOff
	if o.spawnSessions {
		opt.SpawnSubagentSessions = true
	}
	if o.authority == nil {
		o.authority = &fakeAuthority{}
	}
	if _, ok := o.authority.(nilAuthority); ok {
		o.authority = nil
	}
	var reg session.Store = o.registry
	if o.regStore != nil {
		reg = o.regStore
	}
	deps := session.Deps{Outbound: out, Router: delivery.NewRouter(delivery.RouterOptions{}, delivery.RouterDeps{Bindings: bs}), Bindings: bs, Transcripts: tr, Store: reg, Turns: o.turns, Clock: clk, Log: zerolog.Nop(),
		Budget: o.budget, Usage: o.usage,
		Authority: o.authority, Jobs: o.jobs, Typist: o.typist, After: o.after, Fetcher: o.fetcher, Toolbox: o.toolbox, External: o.external}
	if o.lookups != nil {
		deps.Outbound = countingOutbound{Outbound: out, n: o.lookups}
	}
	if !o.noThreads {
		deps.Threads = o.threads
		if o.threadsImpl != nil {
			deps.Threads = o.threadsImpl
		}
	}
	m = session.New(opt, deps)
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, m: m, sender: sender, threads: o.threads, store: st, reg: o.registry, tr: tr, bindings: bs, out: out, clk: clk}
	t.Cleanup(func() { f.settle() })
	return f
}

// settle waits until every queued turn and subagent run has finished.
func (f *fixture) settle() {
	f.t.Helper()
	f.m.Settle()
}

func ref(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id}
}

func keyOf(id string) string { return sessionkey.ForConversation("main", ref(id)) }

var msgSeq struct {
	sync.Mutex
	n int
}

// say posts a user message into conversation conv and returns its id.
func (f *fixture) say(conv binding.ConversationRef, text string) string {
	return f.reply(conv, "", text)
}

func (f *fixture) reply(conv binding.ConversationRef, replyTo, text string) string {
	f.t.Helper()
	msgSeq.Lock()
	msgSeq.n++
	id := strconv.Itoa(100 + msgSeq.n)
	msgSeq.Unlock()
	err := f.m.HandleMessage(context.Background(), session.Message{Conversation: conv, MessageID: id, AuthorID: "u1", AuthorName: "alice", Text: text, ReplyTo: replyTo})
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// entries returns every entry of a session, all generations.
func (f *fixture) entries(key string) []transcript.Entry {
	f.t.Helper()
	es, err := f.tr.Entries(context.Background(), key, 0, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return es
}

func texts(es []transcript.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Source) + "|" + e.Text
	}
	return out
}

func (f *fixture) subagents() []session.Info {
	return f.m.Sessions(func(in session.Info) bool { return in.Kind == session.KindSubagent })
}

// onlySubagent returns the single subagent's registry record.
func (f *fixture) onlySubagent() session.Info {
	f.t.Helper()
	subs := f.subagents()
	if len(subs) != 1 {
		f.t.Fatalf("want 1 subagent, have %d", len(subs))
	}
	return subs[0]
}

// echoFallback answers a Scripted provider's requests like echo.
func echoFallback(req model.Request) (model.Response, error) {
	return echo.New().Complete(context.Background(), req)
}
