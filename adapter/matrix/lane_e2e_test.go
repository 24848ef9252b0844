package matrix

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
)

// gatedStream is a streaming model: a prompt containing "slow" shows "partial " and then waits for release (or
// its context: /stop); any other prompt is answered at once with "fast: <prompt>".
type gatedStream struct {
	mu       sync.Mutex
	release  chan struct{}
	started  chan struct{} // a slow stream showed its first text
	finished chan struct{} // a slow stream returned
}

func newGatedStream() *gatedStream {
	return &gatedStream{release: make(chan struct{}), started: make(chan struct{}, 8), finished: make(chan struct{}, 8)}
}

func (g *gatedStream) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	return g.Stream(ctx, req, func(string) {})
}

func (g *gatedStream) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	prompt := req.Messages[len(req.Messages)-1].Text
	if !strings.Contains(prompt, "slow") {
		onText("fast: " + prompt)
		return model.Response{Text: "fast: " + prompt}, nil
	}
	defer func() { g.finished <- struct{}{} }()
	onText("partial ")
	g.started <- struct{}{}
	select {
	case <-g.release:
		onText("and the rest")
		return model.Response{Text: "partial and the rest"}, nil
	case <-ctx.Done():
		return model.Response{}, model.NewError("gated", 0, ctx.Err())
	}
}

func (g *gatedStream) wait(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("%s: not within %s", what, waitTimeout)
	}
}

// waitText waits until the session of conv holds an entry whose text contains s, and returns it.
func (k *stack) waitText(t *testing.T, conv binding.ConversationRef, s string) transcript.Entry {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		es, err := k.tr.Entries(context.Background(), k.key(conv), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range es {
			if strings.Contains(en.Text, s) {
				return en
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds no entry with %q after %s: %+v", k.key(conv), s, waitTimeout, es)
		}
		<-time.After(20 * time.Millisecond) // polling the transcript the lanes' work writes
	}
}

// TestStreamingConversationStallsNothing (issue 28 item 3): while the bot streams a reply in room A and a second
// message of A waits for that stream's sends, a message in room B is answered and a !stop in A is answered and
// ends the stream. Before the shared lane, the /sync loop handled events one at a time inline: the second message
// of A waited for the stream inside the loop, and nothing after it - B's message, the !stop - was handled until the
// stream ended by itself.
func TestStreamingConversationStallsNothing(t *testing.T) {
	e := newEnv(t)
	roomB := e.newRoom(t)
	sp := newGatedStream()
	k := startStack(t, e, newStores(), func(o *stackOpts) { o.provider, o.stream = sp, true })
	a := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	b := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: roomB}
	k.cmds.answer(func(cmd Command) (string, bool, error) {
		if run, ok := k.sessions.Running(k.key(a)); ok && cmd.Name == "stop" && k.sessions.Stop(run) {
			return "stopped", true, nil
		}
		return "nothing to stop", true, nil
	})

	e.say(t, mention("bot: a slow answer please", e.bot.UserID))
	sp.wait(t, sp.started, "the stream in A")
	e.say(t, mention("bot: and then?", e.bot.UserID)) // waits for A's stream to end
	sendIn(t, e.ali, roomB, mention("bot: hello from B", e.bot.UserID))
	k.waitText(t, b, "fast: bot: hello from B")
	select {
	case <-sp.finished:
		t.Fatal("A's stream ended before B was answered: the test did not test")
	default:
	}
	e.say(t, text("!stop"))
	sp.wait(t, sp.finished, "the stream in A ended by !stop")
	k.waitText(t, a, "stopped")
	k.waitText(t, a, "fast: bot: and then?") // A's waiting message is answered after the stream
}

// TestRedactionWhileStreamingInThread (issue 28 item 3): alice redacts the bot's reply while it still streams in a
// thread; once the stream ends, the thread's transcript shows the reply as deleted, text erased (invariant 17),
// and a message in the room was answered meanwhile. Before the shared lane the redaction waited on the room's sends
// (not the thread's), found no entry yet, and the reply's text stayed in the transcript.
func TestRedactionWhileStreamingInThread(t *testing.T) {
	e := newEnv(t)
	sp := newGatedStream()
	k := startStack(t, e, newStores(), func(o *stackOpts) { o.provider, o.stream = sp, true })
	room := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: e.room}
	root := e.say(t, text("a topic"))
	thread := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: root, ParentConversationID: e.room}
	inThread := mention("bot: slow thoughts on this", e.bot.UserID)
	inThread["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": root}
	e.say(t, inThread)
	sp.wait(t, sp.started, "the stream in the thread")
	var reply string
	deadline := time.Now().Add(waitTimeout)
	for reply == "" {
		for _, ev := range e.roomMessages(t) {
			if ev.Sender.String() == e.bot.UserID && strings.HasPrefix(bodyOf(ev), "partial") {
				reply = ev.ID.String()
			}
		}
		if reply == "" && time.Now().After(deadline) {
			t.Fatal("the streamed reply is not shown")
		}
		<-time.After(20 * time.Millisecond) // polling alice's view for the live message
	}
	if _, err := e.ali.RedactEvent(context.Background(), id.RoomID(e.room), id.EventID(reply)); err != nil {
		t.Fatalf("alice redacts the reply: %v", err)
	}
	e.say(t, mention("bot: meanwhile in the room", e.bot.UserID))
	k.waitText(t, room, "fast: bot: meanwhile in the room")
	close(sp.release)
	sp.wait(t, sp.finished, "the stream in the thread")
	deadline = time.Now().Add(waitTimeout)
	for {
		es, err := k.tr.Entries(context.Background(), k.key(thread), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got *transcript.Entry
		for i := range es {
			if es[i].Role == transcript.RoleAssistant && len(es[i].MessageIDs) > 0 && es[i].MessageIDs[0] == reply {
				got = &es[i]
			}
		}
		if got != nil && got.Text == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the redaction the thread's reply entry is %+v, want it deleted with its text erased (entries %+v)", got, es)
		}
		<-time.After(20 * time.Millisecond) // polling the transcript the redaction's lane writes
	}
}
