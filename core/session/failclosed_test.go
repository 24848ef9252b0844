package session_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/store/memory"
)

func threadRef(id, parent string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id, ParentConversationID: parent}
}

// focus binds a thread to a session the way /focus does: straight through
// the binding service, with no help from Spawn.
func focus(t *testing.T, f *fixture, key, thread string) binding.Record {
	t.Helper()
	b, err := f.bindings.Bind(context.Background(), binding.BindInput{TargetSessionKey: key, TargetKind: binding.KindSubagent,
		Conversation: threadRef(thread, "c1"), BoundBy: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A subagent spawned without a thread and then /focus-bound is a bound
// session: when that binding has ended (archived, deleted, unfocused) its
// result is posted nowhere; the requester gets a notice without it.
func TestFocusBoundCompletionNeverFallsBack(t *testing.T) {
	t.Parallel()
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	ctx := context.Background()
	res, err := f.m.Spawn(ctx, spawnReq("secret", false, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	b := focus(t, f, res.Key, "tf")
	if _, err := f.bindings.Unbind(ctx, binding.UnbindInput{ID: b.ID, Reason: binding.ReasonThreadArchive}); err != nil {
		t.Fatal(err)
	}
	g.release <- struct{}{}
	f.settle()
	parent := f.sender.to("c1")
	if len(parent) != 1 || parent[0].Producer.Source != transcript.SourceNotice || strings.Contains(parent[0].Text, "Done: do secret") {
		t.Fatalf("parent displays %+v, want only the notice", parent)
	}
	if th := f.sender.to("tf"); len(th) != 0 {
		t.Fatalf("archived thread displays %+v", th)
	}
	if in, _ := f.m.Info(res.Key); in.Status != session.StatusUndeliver || in.Result != "Done: do secret" || in.AnnouncePending {
		t.Fatalf("info = %+v", in)
	}
}

// /focus onto a session bound elsewhere moves the binding: the completion
// goes to the new thread only, the old thread is told where it went, and
// the parent shows nothing.
func TestFocusTwiceMovesTheBinding(t *testing.T) {
	t.Parallel()
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	ctx := context.Background()
	res, err := f.m.Spawn(ctx, spawnReq("secret", false, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	focus(t, f, res.Key, "ta")
	focus(t, f, res.Key, "tb")
	g.release <- struct{}{}
	f.settle()
	if p := f.sender.to("c1"); len(p) != 0 {
		t.Fatalf("parent displays %+v", p)
	}
	old := f.sender.to("ta")
	if len(old) != 1 || old[0].Producer.Source != transcript.SourceFarewell || !strings.Contains(old[0].Text, "<#tb>") {
		t.Fatalf("old thread displays %+v, want one notice naming <#tb>", old)
	}
	if got := texts(f.entries(keyOf("ta"))); !slices.Equal(got, []string{"farewell|" + old[0].Text}) {
		t.Fatalf("old thread transcript = %q", got)
	}
	now := f.sender.to("tb")
	if len(now) != 1 || now[0].Producer.Source != transcript.SourceAnnounce || !strings.Contains(now[0].Text, "Done: do secret") {
		t.Fatalf("new thread displays %+v", now)
	}
}

// crashRegistry keeps what was durable at the first moment a subagent's
// terminal status was persisted: a SIGKILL right after that write.
type crashRegistry struct {
	*memory.Sessions
	mu   sync.Mutex
	snap *memory.Sessions
}

func (c *crashRegistry) PutSessionInfo(ctx context.Context, in session.Info) error {
	if err := c.Sessions.PutSessionInfo(ctx, in); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap == nil && in.Kind == session.KindSubagent && in.Status != session.StatusRunning {
		c.snap = memory.NewSessions()
		all, err := c.Sessions.SessionInfos(ctx)
		if err != nil {
			return err
		}
		for _, i := range all {
			if err := c.snap.PutSessionInfo(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// A kill right after a subagent's result was saved, before its completion
// was recorded in the outbox: the restarted manager still delivers it,
// once, and nothing stays owed (invariant 16).
func TestCrashAfterResultBeforeAnnounce(t *testing.T) {
	t.Parallel()
	reg := &crashRegistry{Sessions: memory.NewSessions()}
	f := newFixture(t, fixtureOptions{regStore: reg})
	res, err := f.m.Spawn(context.Background(), spawnReq("job", false, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	if reg.snap == nil {
		t.Fatal("the terminal status was never persisted")
	}
	// The restarted process: the registry as it was at the kill, an empty outbox.
	f2 := newFixture(t, fixtureOptions{registry: reg.snap})
	f2.m.Resume(context.Background())
	f2.settle()
	p := f2.sender.to("c1")
	if len(p) != 1 || p[0].Producer.Source != transcript.SourceAnnounce || !strings.Contains(p[0].Text, "Done: do job") {
		t.Fatalf("after restart the requester displays %+v, want the completion once", p)
	}
	if got := texts(f2.entries(keyOf("c1"))); len(got) != 1 || !strings.HasPrefix(got[0], "announce|") {
		t.Fatalf("requester transcript = %q", got)
	}
	if in, _ := f2.m.Info(res.Key); in.Status != session.StatusOK || in.AnnouncePending {
		t.Fatalf("info after restart = %+v", in)
	}
	// A second restart owes nothing.
	f3 := newFixture(t, fixtureOptions{registry: reg.snap})
	if _, runs := f3.m.Resume(context.Background()); runs != 0 {
		t.Fatalf("second restart resumed %d runs", runs)
	}
}

// A completion left pending (a transient failure) whose thread was then
// archived is recovered through the live path: no post, the notice, status
// undelivered, and the outbox record finished so it is not taken again.
// A thread still bound but now refusing the send ends its binding.
func TestRecoveredCompletionFailsClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []string{"binding ended meanwhile", "send now fails permanently"} {
		t.Run(tc, func(t *testing.T) {
			t.Parallel()
			g := newGate(echo.New())
			f := newFixture(t, fixtureOptions{provider: g, recoverCompletions: true})
			ctx := context.Background()
			res, err := f.m.Spawn(ctx, spawnReq("secret", true, ref("c1")))
			if err != nil {
				t.Fatal(err)
			}
			th := res.Thread.ConversationID
			g.waitEntered(t)
			f.sender.failTo(th, fmt.Errorf("timeout: %w", delivery.ErrTransient))
			g.release <- struct{}{}
			f.settle()
			if in, _ := f.m.Info(res.Key); !in.AnnouncePending || in.Status != session.StatusOK {
				t.Fatalf("after a transient failure info = %+v, want still owed", in)
			}
			in, _ := f.m.Info(res.Key)
			if tc == "binding ended meanwhile" {
				f.sender.failTo(th, nil)
				if _, err := f.bindings.Unbind(ctx, binding.UnbindInput{ID: in.BindingID, Reason: binding.ReasonThreadArchive}); err != nil {
					t.Fatal(err)
				}
			} else {
				f.sender.failTo(th, fmt.Errorf("unknown channel: %w", delivery.ErrDestinationGone))
			}
			for range 2 {
				if _, err := f.out.Recover(ctx, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
					t.Fatal(err)
				}
				f.settle()
			}
			if got := f.sender.to(th); len(got) != 1 || got[0].Producer.Source != transcript.SourceIntro {
				t.Fatalf("thread displays %+v, want the intro only", got)
			}
			parent := f.sender.to("c1")
			if len(parent) != 1 || parent[0].Producer.Source != transcript.SourceNotice || strings.Contains(parent[0].Text, "Done: do secret") {
				t.Fatalf("parent displays %+v", parent)
			}
			after, _ := f.m.Info(res.Key)
			if after.Status != session.StatusUndeliver || after.AnnouncePending || after.Result != "Done: do secret" {
				t.Fatalf("info = %+v", after)
			}
			if b, ok := f.bindings.Get(in.BindingID); ok {
				t.Fatalf("binding still active: %+v", b)
			}
			r, _, _ := f.store.GetDelivery(ctx, "announce:"+res.Key+":1")
			if r.State == delivery.StatePending || r.State == delivery.StateDelivered {
				t.Fatalf("completion record = %+v", r)
			}
		})
	}
}
