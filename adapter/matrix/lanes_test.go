package matrix

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/lane"
)

// TestLaneOf: a conversation's messages share a lane (the room, or the room and the thread named); its text
// commands run on a lane beside it; invites on their own.
func TestLaneOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Inbound
		want string
	}{
		{"room message", Inbound{Kind: KindMessage, RoomID: "!r", Body: "hello"}, "!r"},
		{"thread message", Inbound{Kind: KindMessage, RoomID: "!r", ThreadRoot: "$root", Body: "hello"}, "!r|$root"},
		{"command", Inbound{Kind: KindMessage, RoomID: "!r", Body: "!stop"}, "command|!r"},
		{"command in a thread", Inbound{Kind: KindMessage, RoomID: "!r", ThreadRoot: "$root", Body: "!stop"}, "command|!r|$root"},
		{"a command gone wrong is a command", Inbound{Kind: KindMessage, RoomID: "!r", Body: `!cron add "unclosed`}, "command|!r"},
		// A !cron run lasts as long as the job's run: on the command lane it held back every later command of
		// the room (a !stop of the run, a !cron add: the Matrix soak's seed 38 timed out waiting for that reply).
		{"cron run on a lane of its own", Inbound{Kind: KindMessage, RoomID: "!r", EventID: "$e", Body: "!cron run ab12"}, "run|!r|$e"},
		{"cron run in a thread", Inbound{Kind: KindMessage, RoomID: "!r", ThreadRoot: "$root", EventID: "$e", Body: "!cron run ab12"}, "run|!r|$root|$e"},
		{"other cron commands stay on the command lane", Inbound{Kind: KindMessage, RoomID: "!r", EventID: "$e", Body: "!cron runs ab12"}, "command|!r"},
		{"an unknown command is a message", Inbound{Kind: KindMessage, RoomID: "!r", Body: "!nonsense"}, "!r"},
		{"edit", Inbound{Kind: KindEdit, RoomID: "!r", Body: "!stop"}, "!r"},
		{"redaction", Inbound{Kind: KindRedaction, RoomID: "!r"}, "!r"},
		{"invite", Inbound{Kind: KindInvite, RoomID: "!r"}, "invite|!r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := laneOf(tc.in); got != tc.want {
				t.Fatalf("laneOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// savedTokens records the tokens saved, in order.
type savedTokens struct {
	mu    sync.Mutex
	saved []string
	ch    chan string
}

func (s *savedTokens) LoadSyncToken(context.Context) (string, error) { return "", nil }

func (s *savedTokens) SaveSyncToken(_ context.Context, tok string) error {
	s.mu.Lock()
	s.saved = append(s.saved, tok)
	s.mu.Unlock()
	s.ch <- tok
	return nil
}

// TestTokensSavedBehindTheirEvents: a batch's token is saved only once its events and every earlier batch's are
// handled, also when a later batch finishes first and when an event continues on another lane; a stop saves what
// was handled and no more.
func TestTokensSavedBehindTheirEvents(t *testing.T) {
	st := &savedTokens{ch: make(chan string, 8)}
	sv := newSaver(st)
	lanes := lane.New(lane.Options{}, lane.Deps{})
	release1, release3 := make(chan struct{}), make(chan struct{})
	push := func(b *batch, key string, f func(ctx context.Context)) {
		b.add()
		if err := lanes.Push(key, "t", func(ctx context.Context) { defer b.finish(); f(withLane(ctx, lanes, b)) }); err != nil {
			t.Fatal(err)
		}
	}
	b1, b2, b3 := newBatch("t1"), newBatch("t2"), newBatch("t3")
	push(b1, "a", func(ctx context.Context) {
		<-release1
		continueOn(ctx, "c", "continued", func(context.Context) {}) // counted in b1 until it ran
	})
	push(b2, "b", func(context.Context) {})
	push(b3, "d", func(context.Context) { <-release3 })
	for _, b := range []*batch{b1, b2, b3} {
		b.done()
		sv.batches <- b
	}
	select {
	case tok := <-st.ch:
		t.Fatalf("saved %s while the first batch was still being handled", tok)
	case <-time.After(50 * time.Millisecond): // a save, if wrongly made, is immediate
	}
	close(release1)
	for _, want := range []string{"t1", "t2"} {
		select {
		case tok := <-st.ch:
			if tok != want {
				t.Fatalf("saved %s, want %s", tok, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not saved", want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the stop's time is up: t3's event is still running
	sv.stop(ctx)
	close(release3)
	st.mu.Lock()
	defer st.mu.Unlock()
	if !slices.Equal(st.saved, []string{"t1", "t2"}) {
		t.Fatalf("saved %v, want t1 then t2 (t3's event never finished before the stop)", st.saved)
	}
}
