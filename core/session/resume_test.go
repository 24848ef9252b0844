package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/store/memory"
)

// TestResumeAfterCrash: a previous process left one owed turn and one
// running subagent in the registry; Resume answers the turn once and
// re-runs the subagent once; work of the new process is not resumed.
func TestResumeAfterCrash(t *testing.T) {
	reg := newRegistryWithUnfinished(t)
	f := newFixture(t, fixtureOptions{registry: reg})
	ctx := context.Background()

	// Live work of this process: a subagent spawned after Load.
	if _, err := f.m.Spawn(ctx, session.SpawnRequest{Task: "live task", Requester: ref("c1"), RequestedBy: "u1"}); err != nil {
		t.Fatal(err)
	}
	turns, runs := f.m.Resume(ctx)
	if turns != 1 || runs != 1 {
		t.Fatalf("Resume = %d turns, %d runs; want 1 and 1 (live work must not be resumed)", turns, runs)
	}
	if again, againRuns := f.m.Resume(ctx); again+againRuns != 0 {
		t.Fatalf("second Resume restarted %d turns and %d runs", again, againRuns)
	}
	f.settle()

	es := f.entries(keyOf("c1"))
	var users, replies int
	for _, e := range es {
		switch e.Source {
		case "user":
			users++
		case "turn":
			replies++
		}
	}
	if users != 1 || replies != 1 {
		t.Fatalf("c1 transcript has %d user entries and %d replies, want 1 and 1: %+v", users, replies, es)
	}
	old, _ := f.m.Info("agent:main:subagent:old")
	if old.Status != session.StatusOK || old.Result == "" {
		t.Fatalf("the interrupted subagent was not re-run: %+v", old)
	}
	if len(f.sender.to("c1")) != 3 { // reply, old completion, live completion
		t.Fatalf("c1 got %d messages, want 3", len(f.sender.to("c1")))
	}
	for _, in := range f.m.Sessions(nil) {
		if len(in.Pending) != 0 {
			t.Fatalf("%s still owes %d turns", in.Key, len(in.Pending))
		}
	}
}

func newRegistryWithUnfinished(t *testing.T) *memory.Sessions {
	t.Helper()
	reg := memory.NewSessions()
	ctx := context.Background()
	now := time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC)
	if err := reg.PutSessionInfo(ctx, session.Info{Key: keyOf("c1"), AgentID: "main", Kind: session.KindMain, Requester: ref("c1"), Status: session.StatusIdle, CreatedAt: now,
		Pending: []session.PendingTurn{{Message: session.Message{Conversation: ref("c1"), MessageID: "90", AuthorID: "u1", AuthorName: "alice", Text: "are you there?"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := reg.PutSessionInfo(ctx, session.Info{Key: "agent:main:subagent:old", AgentID: "main", Kind: session.KindSubagent, Requester: ref("c1"), Label: "old",
		Task: "old task", Status: session.StatusRunning, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return reg
}
