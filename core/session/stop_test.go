package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model/echo"
)

// /stop mid-turn cancels the model call, posts nothing, and leaves the
// user's entry (it was displayed); the next message gets its turn.
func TestStopEndsRunningTurn(t *testing.T) {
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	f.say(ref("c1"), "long question")
	g.waitEntered(t)
	run, ok := f.m.Running(keyOf("c1"))
	if !ok || run.Owner != "u1" || run.Kind != session.KindMain {
		t.Fatalf("Running = %+v, %v", run, ok)
	}
	if !f.m.Stop(run) {
		t.Fatal("Stop did not stop the running turn")
	}
	f.settle()
	if got := f.sender.to("c1"); len(got) != 0 {
		t.Fatalf("a stopped turn posted %d messages: %+v", len(got), got)
	}
	if _, ok := f.m.Running(keyOf("c1")); ok {
		t.Fatal("the stopped run is still registered")
	}
	es := f.entries(keyOf("c1"))
	if len(es) != 1 || es[0].Role != transcript.RoleUser || es[0].Text != "long question" {
		t.Fatalf("transcript = %v, want only the user entry", texts(es))
	}
	if f.m.Stop(run) {
		t.Fatal("stopping a finished run reported success")
	}
	f.say(ref("c1"), "next")
	g.waitEntered(t)
	g.release <- struct{}{}
	f.settle()
	if got := f.sender.to("c1"); len(got) != 1 {
		t.Fatalf("the next turn posted %d messages", len(got))
	}
}

// Stopping a subagent ends its task: status stopped, and its completion says so.
func TestStopEndsSubagentRun(t *testing.T) {
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	res, err := f.m.Spawn(context.Background(), spawnReq("scout", false, ref("c1")))
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	run, ok := f.m.Running(res.Key)
	if !ok || run.Label != "scout" || run.Owner != "u1" || run.Kind != session.KindSubagent {
		t.Fatalf("Running = %+v, %v", run, ok)
	}
	if !f.m.Stop(run) {
		t.Fatal("Stop did not stop the subagent")
	}
	f.settle()
	if in := f.onlySubagent(); in.Status != session.StatusStopped || in.AnnouncePending {
		t.Fatalf("subagent = %+v, want stopped and announced", in)
	}
	got := f.sender.to("c1")
	if len(got) != 1 || !strings.Contains(got[0].Text, "scout was stopped") {
		t.Fatalf("completion = %+v", got)
	}
}
