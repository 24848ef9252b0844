package session_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
)

// fakeToolbox offers fs__read to the users in allowed and records who
// asked and which calls ran.
type fakeToolbox struct {
	allowed map[string]bool
	mu      sync.Mutex
	asked   []string // "agent/user@conversation"
	ran     []string // "name user"
}

func (f *fakeToolbox) Tools(_ context.Context, agentID string, actor authz.Actor) []model.Tool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, agentID+"/"+actor.UserID+"@"+actor.Where.ConversationID)
	if !f.allowed[actor.UserID] {
		return nil
	}
	return []model.Tool{{Name: "fs__read", Description: "Read a file.", Parameters: map[string]any{"type": "object"}}}
}

func (f *fakeToolbox) Call(_ context.Context, _ string, actor authz.Actor, call model.ToolCall) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, call.Name+" "+actor.UserID)
	return "file content 42", nil
}

func (f *fakeToolbox) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ran)
}

func toolNames(req model.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	return out
}

// A turn is offered the toolbox's tools for its user next to the bot's
// own; a call runs in the toolbox, and its result reaches the model only.
func TestToolboxToolsInTurn(t *testing.T) {
	t.Parallel()
	tb := &fakeToolbox{allowed: map[string]bool{"u1": true}}
	p := &modeltest.Scripted{Fallback: echoFallback}
	f := newFixture(t, fixtureOptions{provider: p, toolbox: tb})
	f.say(ref("c1"), `!tool fs__read {"path":"a.txt"}`)
	f.settle()
	reqs := p.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	names := toolNames(reqs[0])
	if !slices.Contains(names, "fs__read") || !slices.Contains(names, "send_message") {
		t.Errorf("tools offered = %v, want the bot's own and fs__read", names)
	}
	if got := tb.calls(); !slices.Equal(got, []string{"fs__read u1"}) {
		t.Errorf("toolbox calls = %v", got)
	}
	es := texts(f.entries(keyOf("c1")))
	if len(es) != 2 || es[1] != "turn|tool results:\n- fs__read: file content 42" {
		t.Errorf("entries = %q (the tool round stays out; the reply quotes the result)", es)
	}
}

// A user the toolbox does not admit is offered none of its tools, and a
// model naming one anyway runs nothing.
func TestToolboxNotOfferedToOthers(t *testing.T) {
	t.Parallel()
	tb := &fakeToolbox{allowed: map[string]bool{}}
	p := &modeltest.Scripted{Fallback: echoFallback}
	f := newFixture(t, fixtureOptions{provider: p, toolbox: tb})
	f.say(ref("c1"), `!tool fs__read {}`)
	f.settle()
	if names := toolNames(p.Requests()[0]); slices.Contains(names, "fs__read") {
		t.Errorf("offered %v to a user the toolbox does not admit", names)
	}
	if got := tb.calls(); len(got) != 0 {
		t.Errorf("toolbox ran %v", got)
	}
	if es := texts(f.entries(keyOf("c1"))); !strings.Contains(es[len(es)-1], `tool "fs__read" is not available here`) {
		t.Errorf("entries = %q", es)
	}
}

// A subagent gets its agent's toolbox tools, acting for its spawner, and
// none of the bot's orchestration tools.
func TestSubagentGetsToolboxNotOrchestration(t *testing.T) {
	t.Parallel()
	tb := &fakeToolbox{allowed: map[string]bool{"u1": true}}
	p := &modeltest.Scripted{Fallback: echoFallback}
	f := newFixture(t, fixtureOptions{provider: p, toolbox: tb})
	no := false
	if _, err := f.m.Spawn(context.Background(), session.SpawnRequest{Task: "read it\n!tool fs__read {}", Requester: ref("c1"), RequestedBy: "u1", Thread: &no}); err != nil {
		t.Fatal(err)
	}
	f.settle()
	reqs := p.Requests()
	if len(reqs) == 0 {
		t.Fatal("the subagent made no model call")
	}
	if names := toolNames(reqs[0]); !slices.Equal(names, []string{"fs__read"}) {
		t.Errorf("subagent tools = %v, want only fs__read", names)
	}
	if got := tb.calls(); !slices.Equal(got, []string{"fs__read u1"}) {
		t.Errorf("toolbox calls = %v, want one for the spawner u1", got)
	}
	if in := f.onlySubagent(); !strings.Contains(in.Result, "fs__read: file content 42") {
		t.Errorf("subagent result = %q", in.Result)
	}
}
