package matrix

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/platform"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/store/memory"
)

// recordingSessions is the real session manager, with the messages handed to it kept.
type recordingSessions struct {
	*session.Manager
	mu   sync.Mutex
	msgs []session.Message
}

func (r *recordingSessions) HandleMessage(ctx context.Context, msg session.Message) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
	return r.Manager.HandleMessage(ctx, msg)
}

func (r *recordingSessions) handed() []session.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]session.Message(nil), r.msgs...)
}

// fakeCommands answers text commands by a function and records the calls.
type fakeCommands struct {
	mu    sync.Mutex
	calls []string // "<conv>|<user>|<name> <sub> <options>"
	run   func(cmd Command) (string, bool, error)
}

func (f *fakeCommands) Run(_ context.Context, conv binding.ConversationRef, userID string, cmd Command) (string, bool, error) {
	f.mu.Lock()
	f.calls = append(f.calls, conv.ConversationID+"|"+userID+"|"+cmd.Name)
	f.mu.Unlock()
	return f.run(cmd)
}

func (f *fakeCommands) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// stack is one bot process on Matrix: the core (store, transcripts, bindings, Outbound, sessions with the echo
// model) and the adapter (client, gateway, /sync loop) over a real Dendrite. A second stack over the same store and
// token store is the process after a restart.
type stack struct {
	e        *env
	c        *Client
	st       *memory.Store
	tr       *transcript.Service
	bs       *binding.Service
	out      *delivery.Outbound
	sessions *recordingSessions
	cmds     *fakeCommands
	g        *Gateway
	sync     *running
	cancel   context.CancelFunc
}

type stores struct {
	st     *memory.Store
	infos  *memory.Sessions
	tokens TokenStore
}

func newStores() *stores {
	return &stores{st: memory.New(), infos: memory.NewSessions(), tokens: &memTokens{}}
}

// memTokens is an in-memory TokenStore; with dropSaves, saves are lost (a crash before the save).
type memTokens struct {
	mu        sync.Mutex
	tok       string
	dropSaves bool
	saved     chan struct{}
}

func (m *memTokens) LoadSyncToken(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tok, nil
}

func (m *memTokens) SaveSyncToken(_ context.Context, tok string) error {
	m.mu.Lock()
	if !m.dropSaves {
		m.tok = tok
	}
	ch := m.saved
	m.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

// stackOpts are a stack's variations.
type stackOpts struct {
	provider model.Provider // default: echo
	resume   bool           // call Resume before the sync loop starts, as the wiring does
	gate     *authz.Gate    // the access gate (nil: none)
}

func startStack(t *testing.T, e *env, s *stores, opts ...func(*stackOpts)) *stack {
	t.Helper()
	so := stackOpts{provider: echo.New()}
	for _, o := range opts {
		o(&so)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &stack{e: e, c: e.client(t), st: s.st, cancel: cancel}
	k.tr = transcript.New(transcript.Options{}, transcript.Deps{Store: s.st, Clock: clock.Real{}})
	k.bs = binding.New(binding.Options{}, binding.Deps{Store: s.st, Clock: clock.Real{}, Log: zerolog.Nop()})
	if err := k.bs.Load(ctx); err != nil {
		t.Fatal(err)
	}
	k.out = delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{
		Sender: platform.New(platform.Platform{Name: "discord", Sender: notDiscord{t}}, platform.Platform{Name: "matrix", Sender: DeliverySender{Client: k.c}}),
		Outbox: s.st, Transcripts: k.tr, Bindings: k.bs, Log: zerolog.Nop()})
	m := session.New(session.Options{Channel: "matrix", AccountID: "default", Agents: []session.Agent{{ID: "main", Name: "Main", Provider: so.provider}}},
		session.Deps{Outbound: k.out, Router: delivery.NewRouter(delivery.RouterOptions{}, delivery.RouterDeps{Bindings: k.bs}),
			Bindings: k.bs, Transcripts: k.tr, Store: s.infos, Clock: clock.Real{}, Log: zerolog.Nop()})
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	k.sessions = &recordingSessions{Manager: m}
	if so.resume {
		m.Resume(ctx)
	}
	k.cmds = &fakeCommands{run: func(cmd Command) (string, bool, error) { return "ran " + cmd.Name, true, nil }}
	var err error
	k.g, err = NewGateway(GatewayOptions{AccountID: "default"}, GatewayDeps{Client: k.c, Sessions: k.sessions, Bindings: k.bs,
		Outbound: k.out, Commands: k.cmds, Changes: k.tr, Gate: so.gate, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	saved := make(chan struct{}, 1)
	if mt, ok := s.tokens.(*memTokens); ok {
		mt.mu.Lock()
		mt.saved = saved
		mt.mu.Unlock()
	}
	k.sync = run(t, e.sync(t, k.c, s.tokens, k.g.Handle))
	select { // the first /sync is done: what is sent from now on is handled
	case <-saved:
	case <-time.After(waitTimeout):
		t.Fatal("no first sync")
	}
	t.Cleanup(func() { k.stop(t); <-done })
	return k
}

func (k *stack) stop(t *testing.T) {
	t.Helper()
	k.sync.stop(t)
	k.cancel()
}

func (k *stack) key(conv binding.ConversationRef) string {
	return sessionkey.ForConversation("main", conv)
}

// waitEntries waits until the session of conv holds n entries (at least) and returns them.
func (k *stack) waitEntries(t *testing.T, conv binding.ConversationRef, n int) []transcript.Entry {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		es, err := k.tr.Entries(context.Background(), k.key(conv), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) >= n {
			return es
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d entries after %s, want %d: %+v", k.key(conv), len(es), waitTimeout, n, es)
		}
		<-time.After(20 * time.Millisecond) // polling the transcript the gateway's calls write
	}
}

func mention(body, userID string) map[string]any {
	return map[string]any{"msgtype": "m.text", "body": body, "m.mentions": map[string]any{"user_ids": []string{userID}}}
}

// TestGatewayMentionReply: a message mentioning the bot reaches the session with the fields filled as Discord's
// adapter fills them, and the echo answer shows in the room; a message without a mention is not taken.
func TestGatewayMentionReply(t *testing.T) {
	e := newEnv(t)
	k := startStack(t, e, newStores())
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}

	quiet := e.say(t, text("just talking"))
	bare := e.say(t, mention("bot:", e.bot.UserID)) // a mention and nothing else is not a message to answer
	evID := e.say(t, mention("bot: hello there", e.bot.UserID))
	es := k.waitEntries(t, room, 2)
	if len(es) != 2 || es[0].Role != transcript.RoleUser || es[0].MessageIDs[0] != evID || es[0].Text != "bot: hello there" || es[0].Author != "alice" {
		t.Fatalf("room entries %+v; want alice's message as displayed, then the answer", es)
	}
	if es[1].Text != "echo: bot: hello there" || e.event(t, es[1].MessageIDs[0])["sender"] != e.bot.UserID {
		t.Fatalf("answer entry %+v", es[1])
	}
	msgs := k.sessions.handed()
	if len(msgs) != 1 {
		t.Fatalf("handed %d messages, want 1 (the one without a mention is not taken)", len(msgs))
	}
	want := session.Message{Conversation: room, MessageID: evID, AuthorID: e.alice.UserID, AuthorName: "alice", Text: "bot: hello there"}
	if got := msgs[0]; got.Conversation.Normalize() != want.Conversation.Normalize() || got.MessageID != want.MessageID || got.AuthorID != want.AuthorID || got.AuthorName != want.AuthorName || got.Text != want.Text {
		t.Fatalf("message %+v, want %+v", got, want)
	}
	for _, m := range msgs {
		if m.MessageID == quiet || m.MessageID == bare {
			t.Fatalf("message %s (no mention, or only one) was taken", m.MessageID)
		}
	}
	// A reply to the answer: ReplyTo is the answer's event.
	reply := mention("and this?", e.bot.UserID)
	reply["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]any{"event_id": es[1].MessageIDs[0]}}
	e.say(t, reply)
	k.waitEntries(t, room, 4)
	if msgs := k.sessions.handed(); len(msgs) != 2 || msgs[1].ReplyTo != es[1].MessageIDs[0] {
		t.Fatalf("reply handed as %+v, want ReplyTo %s", msgs[len(msgs)-1], es[1].MessageIDs[0])
	}
}

// TestGatewayReplayAfterCrashNoSecondTurn: the bot answered a message and died before saving the /sync token, so
// the next process is handed the same event again (at-least-once): no second turn, no second answer, one user
// entry. The same holds for an event handed twice within one process.
func TestGatewayReplayAfterCrashNoSecondTurn(t *testing.T) {
	e := newEnv(t)
	s := newStores()
	k := startStack(t, e, s)
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	s.tokens.(*memTokens).mu.Lock()
	s.tokens.(*memTokens).dropSaves = true // the process dies before it saves any later token
	s.tokens.(*memTokens).mu.Unlock()

	evID := e.say(t, mention("bot: once please", e.bot.UserID))
	k.waitEntries(t, room, 2)
	k.g.Handle(context.Background(), Inbound{Kind: KindMessage, RoomID: e.room, EventID: evID, Sender: e.alice.UserID, MsgType: "m.text", Body: "bot: once please", MentionsBot: true})
	k.stop(t)

	k2 := startStack(t, e, s) // resumes from the token before the message: the event is handed again
	deadline := time.Now().Add(waitTimeout)
	for !handedID(k2.sessions.handed(), evID) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted process was not handed the event again: the test did not test")
		}
		<-time.After(20 * time.Millisecond) // waiting for the restarted sync loop to hand the batch again
	}
	// A later message's answer shows that the replay was handled (turns of one session run in order).
	marker := e.say(t, mention("bot: marker", e.bot.UserID))
	es := k2.waitEntries(t, room, 4)
	if len(es) != 4 || es[0].MessageIDs[0] != evID || es[2].MessageIDs[0] != marker || es[3].Text != "echo: bot: marker" {
		t.Fatalf("room entries %+v; want the message and its answer once, then the marker and its answer", es)
	}
	answers := 0
	for _, ev := range e.roomMessages(t) {
		if ev.Sender.String() == e.bot.UserID && strings.HasPrefix(bodyOf(ev), "echo: bot: once please") {
			answers++
		}
	}
	if answers != 1 {
		t.Fatalf("the room shows %d answers to the message, want 1", answers)
	}
}

func handedID(msgs []session.Message, evID string) bool {
	for _, m := range msgs {
		if m.MessageID == evID {
			return true
		}
	}
	return false
}

func bodyOf(ev *event.Event) string {
	b, _ := ev.Content.Raw["body"].(string)
	return b
}

// roomMessages is the room's timeline as alice's /messages shows it (newest first, up to 500).
func (e *env) roomMessages(t *testing.T) []*event.Event {
	t.Helper()
	var out []*event.Event
	from := ""
	for range 5 {
		resp, err := e.ali.Messages(context.Background(), id.RoomID(e.room), from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Chunk {
			if ev.Type == event.EventMessage {
				_ = ev.Content.ParseRaw(ev.Type)
				out = append(out, ev)
			}
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	return out
}

type userErr struct{ msg string }

func (e *userErr) Error() string       { return "internal: " + e.msg }
func (e *userErr) UserMessage() string { return e.msg }

// TestGatewayTextCommands: "!name ..." goes to Commands with the conversation and the invoking user; its reply is
// a reply to the command in the room and an entry of the room's transcript; an error written for the user shows
// as such, any other error shows a generic text (never its own words); a malformed command gets the parser's text;
// a command handed again after its reply was shown is not run again.
func TestGatewayTextCommands(t *testing.T) {
	e := newEnv(t)
	k := startStack(t, e, newStores())
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	k.cmds.run = func(cmd Command) (string, bool, error) {
		switch cmd.Name {
		case "cron":
			return "", false, &userErr{"there is no job \"x\""}
		case "reset":
			return "", false, errors.New("store: disk full at /secret/path")
		}
		return "agents: none (" + cmd.Options["task"] + ")", false, nil
	}
	cmdID := e.say(t, text("!agents"))
	es := k.waitEntries(t, room, 1)
	if es[0].Text != "agents: none ()" || es[0].Source != transcript.SourceCommand {
		t.Fatalf("reply entry %+v", es[0])
	}
	ev := e.event(t, es[0].MessageIDs[0])
	rel, _ := ev["content"].(map[string]any)["m.relates_to"].(map[string]any)
	if irt, _ := rel["m.in_reply_to"].(map[string]any); irt["event_id"] != cmdID {
		t.Fatalf("reply relates %v, want a reply to %s", rel, cmdID)
	}
	k.cmds.mu.Lock()
	call := k.cmds.calls[0]
	k.cmds.mu.Unlock()
	if call != e.room+"|"+e.alice.UserID+"|agents" {
		t.Fatalf("command call %q", call)
	}

	e.say(t, text("!cron remove x"))
	e.say(t, text("!reset"))
	e.say(t, text("!spawn"))
	es = k.waitEntries(t, room, 4)
	got := []string{es[1].Text, es[2].Text, es[3].Text}
	want := []string{"⚠️ there is no job \"x\"", genericFailure, "⚠️ !spawn needs task"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d = %q, want %q", i+1, got[i], want[i])
		}
	}
	if n := k.cmds.n(); n != 3 {
		t.Fatalf("commands run %d times, want 3 (a malformed one is not run)", n)
	}
	if len(k.sessions.handed()) != 0 {
		t.Fatal("a command reached the session as a message")
	}

	k.g.Handle(context.Background(), Inbound{Kind: KindMessage, RoomID: e.room, EventID: cmdID, Sender: e.alice.UserID, MsgType: "m.text", Body: "!agents"})
	if n := k.cmds.n(); n != 3 {
		t.Fatalf("a command handed again after its reply was shown ran again (%d runs)", n)
	}
}

// TestGatewayBoundThread: a message in a bound thread reaches the bound session without a mention; redacting the
// thread's root ends the binding (thread-delete), and the thread's messages then need a mention again.
func TestGatewayBoundThread(t *testing.T) {
	e := newEnv(t)
	k := startStack(t, e, newStores())
	ctx := context.Background()
	th := newThreads(t, k.out)
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	thread, err := th.CreateThread(ctx, room, "🤖 helper")
	if err != nil {
		t.Fatal(err)
	}
	target := sessionkey.Subagent("main", "s1")
	rec, err := k.bs.Bind(ctx, binding.BindInput{TargetSessionKey: target, TargetKind: binding.KindSubagent, Conversation: thread, AgentID: "main", Label: "helper", BoundBy: e.alice.UserID})
	if err != nil {
		t.Fatal(err)
	}
	inThread := func(body string) map[string]any {
		c := text(body)
		c["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": thread.ConversationID, "is_falling_back": true,
			"m.in_reply_to": map[string]any{"event_id": thread.ConversationID}}
		return c
	}
	evID := e.say(t, inThread("how far along?"))
	deadline := time.Now().Add(waitTimeout)
	for !handedID(k.sessions.handed(), evID) {
		if time.Now().After(deadline) {
			t.Fatal("a message in a bound thread did not reach the session")
		}
		<-time.After(20 * time.Millisecond) // waiting for the sync loop
	}
	if m := k.sessions.handed()[0]; m.Conversation.ConversationID != thread.ConversationID || m.Conversation.ParentConversationID != e.room || m.ReplyTo != "" {
		t.Fatalf("thread message handed as %+v", m)
	}

	if _, err := e.ali.RedactEvent(ctx, id.RoomID(e.room), id.EventID(thread.ConversationID)); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(waitTimeout)
	for {
		if _, ok := k.bs.ResolveByConversation(thread); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the binding of a thread whose root was redacted did not end")
		}
		<-time.After(20 * time.Millisecond) // waiting for the sync loop
	}
	recs, err := k.st.Bindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == rec.ID && (r.Status != binding.StatusEnded || r.EndedReason != binding.ReasonThreadDelete) {
			t.Fatalf("binding ended as %+v, want ended with reason %s", r, binding.ReasonThreadDelete)
		}
	}
	// The root was an entry of the room's transcript; its redaction is recorded there.
	if es := k.waitEntries(t, room, 2); len(es) != 2 || !es[0].Deleted || es[0].MessageIDs[0] != thread.ConversationID || es[1].Source != transcript.SourceDeletion {
		t.Fatalf("room entries after the root's redaction %+v, want the root deleted and its deletion record", es)
	}
}

// TestGatewayEditsAndRedactions: the author's edit of a message the bot took is recorded (the model sees the new
// text); an "edit" of it by someone else is not (Matrix clients show only the sender's own edits, so recording it
// would let anyone rewrite what the model thinks alice said); a redaction records the deletion.
func TestGatewayEditsAndRedactions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k := startStack(t, e, newStores())
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	carol, carolCli := e.userClient(t, "carol")
	e.joinAs(t, carol, carolCli)

	evID := e.say(t, mention("bot: the plan is A", e.bot.UserID))
	k.waitEntries(t, room, 2)
	edit := func(cli *mautrix.Client, body string) string {
		t.Helper()
		resp, err := cli.SendMessageEvent(ctx, id.RoomID(e.room), event.EventMessage, map[string]any{
			"msgtype": "m.text", "body": "* " + body, "m.mentions": map[string]any{},
			"m.new_content": map[string]any{"msgtype": "m.text", "body": body, "m.mentions": map[string]any{}},
			"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": evID}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.EventID.String()
	}
	modelSees := func() string {
		t.Helper()
		h, err := k.tr.History(ctx, k.key(room), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range h {
			if len(en.MessageIDs) > 0 && en.MessageIDs[0] == evID {
				return en.Text
			}
		}
		return "(gone)"
	}
	forged := edit(carolCli, "bot: the plan is C (forged by carol)")
	own := edit(e.ali, "bot: the plan is B")
	deadline := time.Now().Add(waitTimeout)
	for modelSees() != "bot: the plan is B" {
		if time.Now().After(deadline) {
			t.Fatalf("after alice's edit the model sees %q", modelSees())
		}
		<-time.After(20 * time.Millisecond) // waiting for the sync loop
	}
	es, err := k.tr.Entries(ctx, k.key(room), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	edits := 0
	for _, en := range es {
		if en.Source == transcript.SourceEdit {
			edits++
			if strings.Contains(en.Text, "forged") || en.Meta["editKey"] == forged {
				t.Fatalf("carol's edit of alice's message was recorded: %+v", en)
			}
		}
	}
	if edits != 1 {
		t.Fatalf("%d edit records, want 1 (alice's %s)", edits, own)
	}

	if _, err := e.ali.RedactEvent(ctx, id.RoomID(e.room), id.EventID(evID)); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(waitTimeout)
	for modelSees() != "(gone)" {
		if time.Now().After(deadline) {
			t.Fatalf("after the redaction the model sees %q", modelSees())
		}
		<-time.After(20 * time.Millisecond) // waiting for the sync loop
	}
}

// TestGatewayDirectMessages: alice opens a DM (an invite marked is_direct): the bot joins and records the room in
// m.direct; her messages there reach her DM session without a mention, and its answer (to "user:@alice") is
// posted into that room; a new process knows the room from m.direct.
func TestGatewayDirectMessages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := newStores()
	k := startStack(t, e, s)
	resp, err := e.ali.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "trusted_private_chat", IsDirect: true, Invite: []id.UserID{id.UserID(e.bot.UserID)}})
	if err != nil {
		t.Fatal(err)
	}
	dmRoom := resp.RoomID.String()
	deadline := time.Now().Add(waitTimeout)
	for {
		var direct map[string][]string
		err := k.c.bot.GetAccountData(ctx, event.AccountDataDirectChats.Type, &direct)
		if err == nil && len(direct[e.alice.UserID]) == 1 && direct[e.alice.UserID][0] == dmRoom {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m.direct after alice's DM invite: %v (%v), want her room %s", direct, err, dmRoom)
		}
		<-time.After(20 * time.Millisecond) // waiting for the sync loop to take the invite
	}
	dm := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: "user:" + e.alice.UserID}
	if sessionkey.ForConversation("main", dm) != "agent:main:matrix:dm:"+e.alice.UserID {
		t.Fatalf("DM key %s", sessionkey.ForConversation("main", dm))
	}
	say := func(body string) string {
		t.Helper()
		r, err := e.ali.SendMessageEvent(ctx, id.RoomID(dmRoom), event.EventMessage, text(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.EventID.String()
	}
	evID := say("hi, no mention needed here")
	es := k.waitEntries(t, dm, 2)
	if es[0].MessageIDs[0] != evID || es[1].Text != "echo: hi, no mention needed here" {
		t.Fatalf("DM entries %+v", es)
	}
	var ans struct {
		RoomID string `json:"room_id"`
	}
	u := e.ali.BuildClientURL("v3", "rooms", dmRoom, "event", es[1].MessageIDs[0])
	if _, err := e.ali.MakeRequest(ctx, "GET", u, nil, &ans); err != nil || ans.RoomID != dmRoom {
		t.Fatalf("the answer is not in the DM room: %+v, %v", ans, err)
	}
	k.stop(t)

	k2 := startStack(t, e, s)
	say("again")
	if es := k2.waitEntries(t, dm, 4); es[3].Text != "echo: again" {
		t.Fatalf("DM entries after a restart %+v", es)
	}

	// A second DM room: the answer goes where she wrote.
	resp, err = e.ali.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "trusted_private_chat", IsDirect: true, Invite: []id.UserID{id.UserID(e.bot.UserID)}})
	if err != nil {
		t.Fatal(err)
	}
	dmRoom = resp.RoomID.String()
	deadline = time.Now().Add(waitTimeout)
	for {
		var direct map[string][]string
		err := k2.c.bot.GetAccountData(ctx, event.AccountDataDirectChats.Type, &direct)
		if err == nil && len(direct[e.alice.UserID]) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m.direct after alice's second DM invite: %v (%v)", direct, err)
		}
		<-time.After(20 * time.Millisecond) // waiting for the sync loop to take the invite
	}
	say("in the second room")
	es = k2.waitEntries(t, dm, 6)
	u = e.ali.BuildClientURL("v3", "rooms", dmRoom, "event", es[5].MessageIDs[0])
	if _, err := e.ali.MakeRequest(ctx, "GET", u, nil, &ans); err != nil || ans.RoomID != dmRoom {
		t.Fatalf("the answer to a message in the second DM room is not there: %+v, %v", ans, err)
	}
}

// TestGatewayEditAddsMention: a message the bot did not take that an edit makes mention it is routed as a new
// message would be (its id, the edit's text, ViaEdit), as on Discord; in a thread it stays in the thread.
func TestGatewayEditAddsMention(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k := startStack(t, e, newStores())
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	rootID := e.say(t, text("a topic"))
	plain := text("what do you think?")
	plain["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": rootID, "is_falling_back": true, "m.in_reply_to": map[string]any{"event_id": rootID}}
	evID := e.say(t, plain)
	e.say(t, map[string]any{
		"msgtype": "m.text", "body": "* bot: what do you think?", "m.mentions": map[string]any{"user_ids": []string{e.bot.UserID}},
		"m.new_content": map[string]any{"msgtype": "m.text", "body": "bot: what do you think?", "m.mentions": map[string]any{"user_ids": []string{e.bot.UserID}}},
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": evID}})
	thread := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: rootID, ParentConversationID: e.room}
	es := k.waitEntries(t, thread, 2)
	if es[0].MessageIDs[0] != evID || es[0].Text != "bot: what do you think?" || es[0].Meta["viaEdit"] != "true" || es[1].Text != "echo: bot: what do you think?" {
		t.Fatalf("thread entries %+v; want the edited message (via edit) and its answer", es)
	}
	if m := k.sessions.handed(); len(m) != 1 || !m[0].ViaEdit || m[0].Conversation.ConversationID != rootID {
		t.Fatalf("handed %+v", m)
	}
	if es, _ := k.tr.Entries(ctx, k.key(room), 0, 10); len(es) != 0 {
		t.Fatalf("the room's session got %+v", es)
	}
}

// stuck is a model that never answers (until its context ends): the process "dies" with the turn unanswered.
type stuck struct{ called chan struct{} }

func (s *stuck) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	select {
	case s.called <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return model.Response{}, ctx.Err()
}

// TestGatewayReplayOfAnUnansweredMessageAfterCrash: the process took a message (its user entry and owed turn are
// stored) and died before answering and before saving the /sync token. The next process resumes the owed turn and
// is handed the same event again: one turn, one answer, one user entry.
func TestGatewayReplayOfAnUnansweredMessageAfterCrash(t *testing.T) {
	e := newEnv(t)
	s := newStores()
	st := &stuck{called: make(chan struct{}, 1)}
	k := startStack(t, e, s, func(o *stackOpts) { o.provider = st })
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	s.tokens.(*memTokens).mu.Lock()
	s.tokens.(*memTokens).dropSaves = true
	s.tokens.(*memTokens).mu.Unlock()

	evID := e.say(t, mention("bot: are you there?", e.bot.UserID))
	select {
	case <-st.called:
	case <-time.After(waitTimeout):
		t.Fatal("the first process never called the model")
	}
	k.sync.stop(t) // the first process is gone from Matrix (its stuck turn is ended at cleanup)

	k2 := startStack(t, e, s, func(o *stackOpts) { o.resume = true })
	deadline := time.Now().Add(waitTimeout)
	for !handedID(k2.sessions.handed(), evID) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted process was not handed the event again: the test did not test")
		}
		<-time.After(20 * time.Millisecond) // waiting for the restarted sync loop to hand the batch again
	}
	marker := e.say(t, mention("bot: marker", e.bot.UserID))
	es := k2.waitEntries(t, room, 4)
	if len(es) != 4 || es[0].MessageIDs[0] != evID || es[1].Text != "echo: bot: are you there?" || es[2].MessageIDs[0] != marker {
		t.Fatalf("room entries %+v; want the message and its one answer, then the marker and its answer", es)
	}
	answers := 0
	for _, ev := range e.roomMessages(t) {
		if ev.Sender.String() == e.bot.UserID && bodyOf(ev) == "echo: bot: are you there?" {
			answers++
		}
	}
	if answers != 1 {
		t.Fatalf("the room shows %d answers, want 1", answers)
	}
}
