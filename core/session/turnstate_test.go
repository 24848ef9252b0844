package session_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/store/memory"
)

// liveSender is the fake sender showing live messages: a post appears in
// sent, an edit changes its text.
type liveSender struct {
	*fakeSender
	at map[string]int // message id -> index in sent
}

func (l *liveSender) PostLive(_ context.Context, d delivery.Delivery, part int, text string, _ delivery.Controls) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := d.ID + "/" + strconv.Itoa(part)
	if ids, ok := l.ids[key]; ok {
		return ids[0], nil
	}
	l.next++
	id := strconv.Itoa(5000 + l.next)
	l.ids[key] = []string{id}
	d.Text = text
	l.at[id] = len(l.sent)
	l.sent = append(l.sent, d)
	return id, nil
}

func (l *liveSender) EditLive(_ context.Context, _ delivery.Delivery, messageID, text string, _ delivery.Controls) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[l.at[messageID]].Text = text
	return nil
}

func (l *liveSender) SplitLive(text string) []string { return []string{text} }

// roundStreamer streams scripted rounds, one per model call.
type roundStreamer struct {
	mu     sync.Mutex
	rounds []func(ctx context.Context, onText func(string)) (model.Response, error)
	calls  int
}

func (s *roundStreamer) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	return s.Stream(ctx, req, func(string) {})
}

func (s *roundStreamer) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	s.mu.Lock()
	n := s.calls
	s.calls++
	s.mu.Unlock()
	if n >= len(s.rounds) {
		return echo.New().Complete(ctx, req)
	}
	return s.rounds[n](ctx, onText)
}

func (s *roundStreamer) called() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestCrashBetweenStreamedRoundsEndsVisibly (issue 27.2, invariant 19): a
// streamed turn shows its first round ("Let me look that up.") under the
// turn's delivery id and calls a tool; the process dies during the next
// round. After the restart, Resume or a catch-up that takes the message
// again must not read the first round as the answer: the turn ends with a
// visible notice (and is not run again: its tools already ran).
func TestCrashBetweenStreamedRoundsEndsVisibly(t *testing.T) {
	for _, how := range []string{"resume", "catch-up"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			st, reg := memory.New(), memory.NewSessions()
			entered, release := make(chan struct{}), make(chan struct{})
			first := &roundStreamer{rounds: []func(context.Context, func(string)) (model.Response, error){
				func(_ context.Context, onText func(string)) (model.Response, error) {
					onText("Let me look that up.")
					return model.Response{Text: "Let me look that up.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "list_jobs", Arguments: "{}"}}}, nil
				},
				func(ctx context.Context, _ func(string)) (model.Response, error) {
					close(entered)
					<-release // the process is dead from here on
					return model.Response{}, model.NewError("test", 0, context.Canceled)
				},
			}}
			f1 := newFixture(t, fixtureOptions{provider: first, stream: true, live: true, instantPacing: true, store: st, registry: reg})
			t.Cleanup(func() { close(release) })
			id := f1.say(ref("c1"), "look it up")
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the second round was not reached")
			}
			if sent := f1.sender.to("c1"); len(sent) != 1 || sent[0].Text != "Let me look that up." {
				t.Fatalf("before the crash the chat shows %+v", sent)
			}

			again := &roundStreamer{}
			f2 := newFixture(t, fixtureOptions{provider: again, stream: true, live: true, instantPacing: true, store: st, registry: reg})
			ctx := context.Background()
			switch how {
			case "resume":
				f2.m.Resume(ctx)
			case "catch-up":
				if err := f2.m.HandleMessage(ctx, session.Message{Conversation: ref("c1"), MessageID: id, AuthorID: "u1", AuthorName: "alice", Text: "look it up"}); err != nil {
					t.Fatal(err)
				}
			}
			f2.settle()
			// A later catch-up taking the message again finds it answered.
			if err := f2.m.HandleMessage(ctx, session.Message{Conversation: ref("c1"), MessageID: id, AuthorID: "u1", AuthorName: "alice", Text: "look it up"}); err != nil {
				t.Fatal(err)
			}
			f2.settle()
			sent := f2.sender.to("c1")
			if len(sent) != 1 || !strings.Contains(sent[0].Text, "restarted") {
				t.Fatalf("after the restart the chat got %+v, want one notice that the reply was interrupted", sent)
			}
			if n := again.called(); n != 0 {
				t.Fatalf("the restarted bot called the model %d times: the interrupted turn ran again", n)
			}
			es := f2.entries(keyOf("c1"))
			if last := es[len(es)-1]; last.Source != "notice" || !strings.Contains(last.Text, "restarted") {
				t.Fatalf("transcript ends with %+v, want the notice", texts(es))
			}
			for _, in := range f2.m.Sessions(nil) {
				if len(in.Pending) != 0 {
					t.Fatalf("%s still owes %+v", in.Key, in.Pending)
				}
			}
		})
	}
}
