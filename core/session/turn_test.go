package session_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/model/modeltest"
)

// A message arriving during a turn is written at arrival and queues behind
// the running turn; the turns never overlap and reply in order.
func TestTurnsRunOneAtATimePerSession(t *testing.T) {
	t.Parallel()
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	c := ref("c1")
	m1 := f.say(c, "first")
	req := g.waitEntered(t)
	if got := req.Messages[len(req.Messages)-1].Text; got != "first" {
		t.Fatalf("first turn's last message = %q", got)
	}
	m2 := f.say(c, "second")

	// Both user entries are written at arrival, before any reply.
	if got, want := texts(f.entries(keyOf("c1"))), []string{"user|first", "user|second"}; !slices.Equal(got, want) {
		t.Fatalf("entries during the first turn = %q, want %q", got, want)
	}
	select {
	case <-g.entered:
		t.Fatal("second turn started while the first was running")
	default:
	}
	g.release <- struct{}{}
	g.waitEntered(t)
	g.release <- struct{}{}
	f.settle()

	if g.maxAct != 1 {
		t.Fatalf("turns overlapped: %d at once", g.maxAct)
	}
	es := f.entries(keyOf("c1"))
	// The first turn read its history when it started, before "second" arrived.
	if got, want := texts(es), []string{"user|first", "user|second", "turn|echo: first", "turn|echo: second"}; !slices.Equal(got, want) {
		t.Fatalf("entries = %q, want %q", got, want)
	}
	sent := f.sender.to("c1")
	if len(sent) != 2 || sent[0].ReplyTo != m1 || sent[1].ReplyTo != m2 {
		t.Fatalf("replies = %+v, want replies to %s then %s", sent, m1, m2)
	}
	if es[0].MessageIDs[0] != m1 || es[0].Author != "alice" || es[0].Meta["authorId"] != "u1" {
		t.Fatalf("user entry = %+v", es[0])
	}
}

// Sessions of different conversations do not wait for each other.
func TestTurnsOfDifferentSessionsRunConcurrently(t *testing.T) {
	t.Parallel()
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	f.say(ref("c1"), "one")
	g.waitEntered(t)
	f.say(ref("c2"), "two")
	g.waitEntered(t) // would block if c2 queued behind c1
	g.release <- struct{}{}
	g.release <- struct{}{}
	f.settle()
}

// The reply is written once, after the receipt, with the receipt's message
// ids; a failed reply writes nothing.
func TestReplyWrittenOnceAfterReceipt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	c := ref("c1")
	mid := f.say(c, "hello")
	f.settle()
	es := f.entries(keyOf("c1"))
	if len(es) != 2 {
		t.Fatalf("entries = %q", texts(es))
	}
	r := es[1]
	sent := f.sender.to("c1")
	if len(sent) != 1 {
		t.Fatalf("sent %d replies", len(sent))
	}
	if r.Role != transcript.RoleAssistant || r.Source != transcript.SourceTurn || r.Text != "echo: hello" ||
		!slices.Equal(r.MessageIDs, []string{f.sender.idOf(sent[0].ID)}) || r.DeliveryID != "turn:"+mid || r.Author != "Assistant" {
		t.Fatalf("reply entry = %+v", r)
	}
	if sent[0].ReplyTo != mid || sent[0].ViaWebhook || sent[0].Producer.TurnSessionKey != keyOf("c1") {
		t.Fatalf("reply delivery = %+v", sent[0])
	}
	rec, ok, err := f.store.GetDelivery(context.Background(), sent[0].ID)
	if err != nil || !ok || rec.State != delivery.StateDelivered || rec.Reason != delivery.SkipTurnReply {
		t.Fatalf("outbox record = %+v %v %v", rec, ok, err)
	}

	// A send that fails writes nothing (invariant 2); the session keeps working.
	f.sender.failTo("c1", delivery.ErrTransient)
	f.say(c, "lost")
	f.settle()
	if got := texts(f.entries(keyOf("c1"))); len(got) != 3 || got[2] != "user|lost" {
		t.Fatalf("after a failed reply: %q", got)
	}
	f.sender.failTo("c1", nil)
	f.say(c, "again")
	f.settle()
	if got := texts(f.entries(keyOf("c1"))); len(got) != 5 || got[4] != "turn|echo: again" {
		t.Fatalf("after recovery: %q", got)
	}
}

// Provider errors become a short visible notice (source notice, written
// by the turn after the receipt); the session answers the next message.
func TestProviderErrorsBecomeNotice(t *testing.T) {
	t.Parallel()
	for _, kind := range []model.ErrorKind{model.KindAuth, model.KindRateLimit, model.KindServer, model.KindTimeout} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{})
			c := ref("c1")
			f.say(c, "!fail "+string(kind))
			f.settle()
			f.say(c, "still there?")
			f.settle()
			es := f.entries(keyOf("c1"))
			if len(es) != 4 {
				t.Fatalf("entries = %q", texts(es))
			}
			n := es[1]
			status := map[model.ErrorKind]int{model.KindAuth: 401, model.KindRateLimit: 429, model.KindServer: 500}[kind]
			want := "⚠️ " + (&model.Error{Kind: kind, Status: status}).UserMessage()
			if n.Source != transcript.SourceNotice || n.Role != transcript.RoleAssistant || n.Text != want || len(n.MessageIDs) != 1 {
				t.Fatalf("notice entry = %+v, want text %q", n, want)
			}
			if strings.Contains(n.Text, "!fail") || strings.Contains(n.Text, "echo:") {
				t.Fatalf("notice leaks provider details: %q", n.Text)
			}
			if es[3].Source != transcript.SourceTurn || es[3].Text != "echo: still there?" {
				t.Fatalf("turn after the error = %+v", es[3])
			}
			if sent := f.sender.to("c1"); len(sent) != 2 || sent[0].Text != want {
				t.Fatalf("displayed = %+v", sent)
			}
		})
	}
}

// A model that keeps calling tools is stopped after MaxToolSteps rounds of
// tool calls, and the user sees a notice instead of silence.
func TestToolLoopBoundedByMaxToolSteps(t *testing.T) {
	t.Parallel()
	p := &modeltest.Scripted{Fallback: func(model.Request) (model.Response, error) {
		return model.Response{ToolCalls: []model.ToolCall{{ID: "x", Name: "no_such_tool", Arguments: "{}"}}}, nil
	}}
	f := newFixture(t, fixtureOptions{provider: p, maxToolSteps: 3})
	f.say(ref("c1"), "loop forever")
	f.settle()
	reqs := p.Requests()
	if len(reqs) != 4 {
		t.Fatalf("provider called %d times, want MaxToolSteps+1 = 4", len(reqs))
	}
	last := reqs[3].Messages
	tools := 0
	for _, m := range last {
		if m.Role == model.RoleTool {
			tools++
			if !strings.Contains(m.Text, "is not available here") {
				t.Fatalf("tool result = %q", m.Text)
			}
		}
	}
	if tools != 3 {
		t.Fatalf("%d tool results in the last request, want 3", tools)
	}
	es := f.entries(keyOf("c1"))
	if len(es) != 2 || es[1].Source != transcript.SourceNotice {
		t.Fatalf("entries = %q, want the user message and a notice", texts(es))
	}
	// Tool calls and results are never stored.
	for _, e := range es {
		if strings.Contains(e.Text, "is not available here") {
			t.Fatalf("tool result stored: %+v", e)
		}
	}
}

// send_message to another conversation goes through Outbound into that
// conversation's session (source message-tool); the sending chat gets only
// its turn's reply.
func TestSendMessageToAnotherConversation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.say(ref("c1"), `!tool send_message {"to":"channel:c2","text":"hello c2"}`)
	f.settle()
	other := f.entries(keyOf("c2"))
	sent2 := f.sender.to("c2")
	if len(other) != 1 || len(sent2) != 1 {
		t.Fatalf("c2 entries %q, sends %d", texts(other), len(sent2))
	}
	if e := other[0]; e.Source != transcript.SourceMessageTool || e.Text != "hello c2" || e.Role != transcript.RoleAssistant ||
		!slices.Equal(e.MessageIDs, []string{f.sender.idOf(sent2[0].ID)}) {
		t.Fatalf("c2 entry = %+v", e)
	}
	own := texts(f.entries(keyOf("c1")))
	if len(own) != 2 || !strings.HasPrefix(own[1], "turn|tool results:\n- send_message: sent (message ") {
		t.Fatalf("c1 entries = %q", own)
	}
	// DMs: user:<id> targets the DM session.
	f.say(ref("c1"), `!tool send_message {"to":"user:42","text":"psst"}`)
	f.settle()
	if dm := texts(f.entries("agent:main:discord:dm:42")); !slices.Equal(dm, []string{"message-tool|psst"}) {
		t.Fatalf("dm entries = %q", dm)
	}
}

// send_message to the turn's own conversation is part of the turn: written
// once, by the turn.
func TestSendMessageToOwnConversationWrittenOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.say(ref("c1"), `!tool send_message {"to":"channel:c1","text":"note to self"}`)
	f.settle()
	es := f.entries(keyOf("c1"))
	n := 0
	for _, e := range es {
		if e.Text == "note to self" {
			n++
			if e.Source != transcript.SourceMessageTool || len(e.MessageIDs) != 1 {
				t.Fatalf("entry = %+v", e)
			}
		}
	}
	if n != 1 || len(es) != 3 || len(f.sender.to("c1")) != 2 {
		t.Fatalf("entries = %q (note written %d times), displayed %d", texts(es), n, len(f.sender.to("c1")))
	}
}

// The model's tool-call errors become tool results, never crash the turn.
func TestBadToolArgumentsBecomeToolResults(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.say(ref("c1"), `!tool send_message {"to":"nowhere","text":"x"}`)
	f.settle()
	es := texts(f.entries(keyOf("c1")))
	if len(es) != 2 || !strings.Contains(es[1], "send_message: error: target \"nowhere\"") {
		t.Fatalf("entries = %q", es)
	}
}

// Inbound routing and Outbound writes map a conversation to the same
// session key (invariant 10): channel, DM and a bound thread.
func TestSessionKeyParity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	res, err := f.m.Spawn(context.Background(), spawnReq("parity", true, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	thread := *res.Thread
	for name, c := range map[string]struct {
		id, parent, want string
	}{
		"channel":      {"c9", "", "agent:main:discord:channel:c9"},
		"dm":           {"user:7", "", "agent:main:discord:dm:7"},
		"bound thread": {thread.ConversationID, "c1", res.Key},
	} {
		conv := f.m.ConversationRef(c.id, c.parent)
		mid := f.say(conv, "inbound "+name)
		f.settle()
		inKey := ""
		for _, key := range []string{c.want, keyOf(c.id)} {
			for _, e := range f.entries(key) {
				if len(e.MessageIDs) == 1 && e.MessageIDs[0] == mid {
					inKey = key
				}
			}
		}
		out, err := f.out.Deliver(context.Background(), delivery.Delivery{ID: "parity:" + name, Target: conv, Text: "outbound " + name,
			Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if inKey != c.want || out.SessionKey != c.want {
			t.Errorf("%s: inbound key %q, outbound key %q, want %q", name, inKey, out.SessionKey, c.want)
		}
	}
}

// TestTurnAnswersItsOwnMessage: a message queued behind a running turn is
// not in that turn's request; it gets its own turn.
func TestTurnAnswersItsOwnMessage(t *testing.T) {
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	f.say(ref("c1"), "first")
	first := g.waitEntered(t)
	f.say(ref("c1"), "second")
	g.release <- struct{}{}
	second := g.waitEntered(t)
	g.release <- struct{}{}
	f.settle()
	for _, m := range first.Messages {
		if strings.Contains(m.Text, "second") {
			t.Fatalf("first turn saw the message queued behind it: %+v", first.Messages)
		}
	}
	if last := second.Messages[len(second.Messages)-1]; !strings.Contains(last.Text, "second") {
		t.Fatalf("second turn's last message = %q", last.Text)
	}
}
