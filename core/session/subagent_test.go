package session_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/store/memory"
)

func spawnReq(label string, thread bool, requester binding.ConversationRef) session.SpawnRequest {
	return session.SpawnRequest{Task: "do " + label, Label: label, Thread: &thread, Requester: requester, RequestedBy: "u1"}
}

// /spawn with a thread: the thread is created in the requester's channel,
// bound (kind subagent, boundBy the user), the intro is posted as the
// persona by webhook, and the completion lands in the thread only.
func TestSpawnWithThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{opts: session.Options{IdleTimeout: 24 * time.Hour}})
	res, err := f.m.Spawn(context.Background(), spawnReq("planner", true, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	if res.Thread == nil || res.Thread.ParentConversationID != "c1" || !slices.Equal(f.threads.parents, []string{"c1"}) {
		t.Fatalf("thread = %+v, parents %v", res.Thread, f.threads.parents)
	}
	if !strings.Contains(res.Summary(), "<#"+res.Thread.ConversationID+">") || !strings.Contains(res.Summary(), res.Key) {
		t.Fatalf("summary = %q", res.Summary())
	}
	bs := f.bindings.ListBySession(res.Key)
	if len(bs) != 1 || bs[0].TargetKind != binding.KindSubagent || bs[0].BoundBy != "u1" || bs[0].Conversation.ConversationID != res.Thread.ConversationID || bs[0].Label != "planner" {
		t.Fatalf("bindings = %+v", bs)
	}
	in := f.onlySubagent()
	if in.Status != session.StatusOK || in.BindingID != bs[0].ID || in.Thread != res.Thread.ConversationID || in.Parent != keyOf("c1") || in.SpawnedBy != "u1" {
		t.Fatalf("info = %+v", in)
	}
	th := f.sender.to(res.Thread.ConversationID)
	if len(th) != 2 {
		t.Fatalf("thread displays %d messages", len(th))
	}
	intro, done := th[0], th[1]
	for _, d := range th {
		if !d.ViaWebhook || d.Persona.Name != "🤖 planner" || d.BindingID != bs[0].ID {
			t.Fatalf("thread post not as persona: %+v", d)
		}
	}
	if !strings.HasPrefix(intro.Text, "⚙️ planner session active (idle auto-unfocus after 24h inactivity)") || !strings.HasSuffix(intro.Text, "Task: do planner") {
		t.Fatalf("intro = %q", intro.Text)
	}
	if done.Text != "✅ planner finished:\nDone: do planner" {
		t.Fatalf("completion = %q", done.Text)
	}
	if n := len(f.sender.to("c1")); n != 0 {
		t.Fatalf("parent channel displays %d messages", n)
	}
	if got := texts(f.entries(res.Key)); !slices.Equal(got, []string{"intro|" + intro.Text, "announce|" + done.Text}) {
		t.Fatalf("thread transcript = %q", got)
	}
	if got := f.entries(keyOf("c1")); len(got) != 0 {
		t.Fatalf("parent transcript = %q", texts(got))
	}
}

// Spawning from inside a bound thread creates the new thread in the parent
// channel (threads cannot nest).
func TestSpawnFromThreadCreatesThreadInParent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	first, err := f.m.Spawn(context.Background(), spawnReq("a", true, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.m.Spawn(context.Background(), spawnReq("b", true, *first.Thread))
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	if second.Thread == nil || second.Thread.ParentConversationID != "c1" || !slices.Equal(f.threads.parents, []string{"c1", "c1"}) {
		t.Fatalf("second thread = %+v, parents %v", second.Thread, f.threads.parents)
	}
	// Its requester is the first thread, and the session it routes to.
	in, _ := f.m.Info(second.Key)
	if in.Requester.ConversationID != first.Thread.ConversationID || in.Parent != first.Key {
		t.Fatalf("info = %+v", in)
	}
	if n := len(f.sender.to(second.Thread.ConversationID)); n != 2 {
		t.Fatalf("second thread displays %d", n)
	}
}

// DMs have no threads and disabled bindings create none: the subagent is
// never bound, and its completion goes to the requester conversation.
func TestSpawnWithoutThread(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		conv      string
		off       bool
		noThreads bool
		reason    string
	}{
		{"dm", "user:42", false, false, "direct messages have no threads"},
		{"bindings disabled", "c1", true, false, "thread bindings are disabled"},
		{"no thread support", "c1", false, true, "this platform has no threads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{threadsOff: c.off, noThreads: c.noThreads})
			res, err := f.m.Spawn(context.Background(), spawnReq("x", true, ref(c.conv)))
			if err != nil {
				t.Fatal(err)
			}
			f.settle()
			if res.Thread != nil || res.NoThreadReason != c.reason || !strings.Contains(res.Summary(), c.reason) {
				t.Fatalf("result = %+v", res)
			}
			if len(f.threads.parents) != 0 || len(f.bindings.Active()) != 0 {
				t.Fatal("a thread or binding was created")
			}
			sent := f.sender.to(c.conv)
			if len(sent) != 1 || sent[0].Text != "✅ x finished:\nDone: do x" || sent[0].ViaWebhook {
				t.Fatalf("requester displays %+v", sent)
			}
			key := keyOf(c.conv)
			if got := texts(f.entries(key)); !slices.Equal(got, []string{"announce|" + sent[0].Text}) {
				t.Fatalf("requester transcript %s = %q", key, got)
			}
		})
	}
}

// The spawn_subagent tool starts a subagent from a turn; without a thread
// its completion reaches the requester conversation.
func TestSpawnSubagentTool(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.say(ref("c1"), `!tool spawn_subagent {"task":"count sheep","label":"sheep","thread":false}`)
	f.settle()
	in := f.onlySubagent()
	if in.Task != "count sheep" || in.Label != "sheep" || in.Parent != keyOf("c1") || in.SpawnedBy != "u1" || in.Status != session.StatusOK {
		t.Fatalf("info = %+v", in)
	}
	got := texts(f.entries(keyOf("c1")))
	if len(got) != 3 || !strings.Contains(got[1], "spawn_subagent: Started subagent **sheep**") && !strings.Contains(got[2], "spawn_subagent: Started subagent **sheep**") {
		t.Fatalf("entries = %q", got)
	}
	if !slices.Contains(got, "announce|✅ sheep finished:\nDone: count sheep") {
		t.Fatalf("completion missing: %q", got)
	}

	// With a thread (the default here): bound with the user as boundBy.
	f2 := newFixture(t, fixtureOptions{spawnSessions: true})
	f2.say(ref("c1"), `!tool spawn_subagent {"task":"count goats","label":"goats"}`)
	f2.settle()
	in2 := f2.onlySubagent()
	b, ok := f2.bindings.Get(in2.BindingID)
	if !ok || b.BoundBy != "u1" || b.TargetKind != binding.KindSubagent {
		t.Fatalf("binding = %+v %v", b, ok)
	}
	for _, e := range f2.entries(keyOf("c1")) {
		if strings.Contains(e.Text, "goats finished") {
			t.Fatalf("completion in the parent: %q", e.Text)
		}
	}
}

// Subagents are offered no tools, and a tool call their model makes anyway
// is not executed.
func TestToolsNotOfferedToSubagents(t *testing.T) {
	t.Parallel()
	p := &modeltest.Scripted{Fallback: echoFallback}
	f := newFixture(t, fixtureOptions{provider: p})
	res, err := f.m.Spawn(context.Background(), spawnReq("quiet", true, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.say(*res.Thread, `!tool send_message {"to":"channel:c7","text":"escaped"}`)
	f.settle()
	f.say(ref("c1"), "main session")
	f.settle()
	reqs := p.Requests()
	if len(reqs) != 4 { // run, thread turn, its tool-result round, main turn
		t.Fatalf("%d requests", len(reqs))
	}
	for _, r := range reqs[:3] {
		if len(r.Tools) != 0 {
			t.Fatalf("subagent offered tools: %v", r.Tools)
		}
	}
	if len(reqs[3].Tools) == 0 {
		t.Fatal("main session offered no tools")
	}
	if !strings.Contains(reqs[0].System, "Task: do quiet") {
		t.Fatalf("subagent system prompt = %q", reqs[0].System)
	}
	if n := len(f.sender.to("c7")); n != 0 {
		t.Fatalf("a subagent's tool call was executed: %d sends to c7", n)
	}
	// The thread's turn replied as the persona, in the subagent's session.
	th := f.sender.to(res.Thread.ConversationID)
	if last := th[len(th)-1]; !last.ViaWebhook || last.Persona.Name != "🤖 quiet" || !strings.Contains(last.Text, `tool "send_message" is not available here`) {
		t.Fatalf("thread reply = %+v", last)
	}
}

// A bound subagent whose binding ended before it finished posts nowhere;
// the requester gets a notice without the result, the result is kept with
// status undelivered (invariant 6).
func TestCompletionAfterBindingEnded(t *testing.T) {
	t.Parallel()
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	res, err := f.m.Spawn(context.Background(), spawnReq("secret", true, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	if _, err := f.bindings.Unbind(context.Background(), binding.UnbindInput{TargetSessionKey: res.Key, Reason: binding.ReasonThreadDelete}); err != nil {
		t.Fatal(err)
	}
	g.release <- struct{}{}
	f.settle()
	assertFailClosed(t, f, res, "Done: do secret")
}

// A send that fails with ErrDestinationGone (or a missing permission) at
// completion ends the binding with a reason and notices the requester.
func TestCompletionSendFailsClosed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("unknown channel: %w", delivery.ErrDestinationGone), binding.ReasonThreadDelete},
		{fmt.Errorf("50013: %w", delivery.ErrForbidden), binding.ReasonNoPermission},
	} {
		t.Run(c.reason, func(t *testing.T) {
			t.Parallel()
			g := newGate(echo.New())
			f := newFixture(t, fixtureOptions{provider: g})
			res, err := f.m.Spawn(context.Background(), spawnReq("secret", true, ref("c1")))
			if err != nil {
				t.Fatal(err)
			}
			g.waitEntered(t)
			f.sender.failTo(res.Thread.ConversationID, c.err)
			g.release <- struct{}{}
			f.settle()
			assertFailClosed(t, f, res, "Done: do secret")
			in, _ := f.m.Info(res.Key)
			b, _ := f.bindings.Get(in.BindingID)
			all, _ := f.bindings.All(context.Background())
			var ended binding.Record
			for _, r := range all {
				if r.ID == in.BindingID {
					ended = r
				}
			}
			if b.Status == binding.StatusActive || ended.Status != binding.StatusEnded || ended.EndedReason != c.reason {
				t.Fatalf("binding = %+v", ended)
			}
		})
	}
}

func assertFailClosed(t *testing.T, f *fixture, res session.SpawnResult, result string) {
	t.Helper()
	th := f.sender.to(res.Thread.ConversationID)
	if len(th) != 1 { // the intro only
		t.Fatalf("thread displays %d messages: %+v", len(th), th)
	}
	parent := f.sender.to("c1")
	if len(parent) != 1 || parent[0].Producer.Source != transcript.SourceNotice || strings.Contains(parent[0].Text, result) ||
		!strings.Contains(parent[0].Text, "secret") {
		t.Fatalf("parent displays %+v", parent)
	}
	if got := texts(f.entries(keyOf("c1"))); !slices.Equal(got, []string{"notice|" + parent[0].Text}) {
		t.Fatalf("parent transcript = %q", got)
	}
	for _, e := range f.entries(res.Key) {
		if e.Source == transcript.SourceAnnounce {
			t.Fatalf("announce written: %+v", e)
		}
	}
	in, _ := f.m.Info(res.Key)
	if in.Status != session.StatusUndeliver || in.Result != result {
		t.Fatalf("info = %+v", in)
	}
	stored, _ := f.reg.SessionInfos(context.Background())
	for _, s := range stored {
		if s.Key == res.Key && (s.Status != session.StatusUndeliver || s.Result != result) {
			t.Fatalf("persisted info = %+v", s)
		}
	}
}

// The concurrency cap refuses spawns beyond MaxConcurrentSubagents, also
// when the first spawn is still creating its thread.
func TestSubagentConcurrencyCap(t *testing.T) {
	t.Parallel()
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g, opts: session.Options{MaxConcurrentSubagents: 1}})
	if _, err := f.m.Spawn(context.Background(), spawnReq("one", false, ref("c1"))); err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	if _, err := f.m.Spawn(context.Background(), spawnReq("two", false, ref("c1"))); !errors.Is(err, session.ErrTooManySubagents) {
		t.Fatalf("second spawn: %v, want ErrTooManySubagents", err)
	}
	g.release <- struct{}{}
	f.settle()
	if _, err := f.m.Spawn(context.Background(), spawnReq("three", false, ref("c1"))); err != nil {
		t.Fatalf("spawn after the first finished: %v", err)
	}
	g.waitEntered(t)
	g.release <- struct{}{}
	f.settle()

	// A spawn still creating its thread counts.
	threads := &fakeThreads{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	f2 := newFixture(t, fixtureOptions{threads: threads, opts: session.Options{MaxConcurrentSubagents: 1}})
	done := make(chan error, 1)
	go func() {
		_, err := f2.m.Spawn(context.Background(), spawnReq("slow", true, ref("c1")))
		done <- err
	}()
	<-threads.entered
	_, err := f2.m.Spawn(context.Background(), spawnReq("fast", false, ref("c1")))
	close(threads.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, session.ErrTooManySubagents) {
		t.Fatalf("spawn during another's thread creation: %v, want ErrTooManySubagents", err)
	}
}

// A spawn whose thread cannot be created leaves nothing behind.
func TestSpawnThreadFailureRegistersNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{threadsImpl: failingThreads{}, opts: session.Options{MaxConcurrentSubagents: 1}})
	if _, err := f.m.Spawn(context.Background(), spawnReq("x", true, ref("c1"))); err == nil {
		t.Fatal("spawn succeeded")
	}
	if n := len(f.subagents()); n != 0 {
		t.Fatalf("%d subagents registered", n)
	}
	if _, err := f.m.Spawn(context.Background(), spawnReq("y", false, ref("c1"))); err != nil {
		t.Fatalf("a failed spawn still counts against the cap: %v", err)
	}
}

type failingThreads struct{}

func (failingThreads) CreateThread(context.Context, binding.ConversationRef, string) (binding.ConversationRef, error) {
	return binding.ConversationRef{}, errors.New("50013 missing permissions")
}

// A run that outlives SubagentTimeout ends with status timeout and a
// timeout completion.
func TestSubagentRunTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{provider: ctxBlocker{}, opts: session.Options{SubagentTimeout: 20 * time.Millisecond}})
	res, err := f.m.Spawn(context.Background(), spawnReq("slow", false, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	in, _ := f.m.Info(res.Key)
	if in.Status != session.StatusTimeout || in.EndedAt.IsZero() {
		t.Fatalf("info = %+v", in)
	}
	if sent := f.sender.to("c1"); len(sent) != 1 || sent[0].Text != "⏱️ slow timed out before finishing its task." {
		t.Fatalf("displayed %+v", sent)
	}
}

// ctxBlocker answers only when the context ends.
type ctxBlocker struct{}

func (ctxBlocker) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	<-ctx.Done()
	return model.Response{}, model.NewError("blocker", 0, ctx.Err())
}

// Load restores the registry: a finished run keeps its status and result.
// (What happens to runs left running is being reworked concurrently, from
// "marked interrupted" to "resumed", so this test does not pin it.)
func TestLoadRestoresRegistry(t *testing.T) {
	t.Parallel()
	reg := memory.NewSessions()
	ctx := context.Background()
	in := session.Info{Key: "agent:main:subagent:bbb", AgentID: "main", Kind: session.KindSubagent, Status: session.StatusUndeliver, Result: "kept", BindingID: "b1", Label: "old"}
	if err := reg.PutSessionInfo(ctx, in); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOptions{registry: reg})
	got, ok := f.m.Info(in.Key)
	if !ok || got.Status != session.StatusUndeliver || got.Result != "kept" || got.BindingID != "b1" {
		t.Fatalf("after Load: %+v %v", got, ok)
	}
	// A finished run does not count against the cap.
	f2 := newFixture(t, fixtureOptions{registry: reg, opts: session.Options{MaxConcurrentSubagents: 1}})
	if _, err := f2.m.Spawn(ctx, spawnReq("new", false, ref("c1"))); err != nil {
		t.Fatal(err)
	}
}
