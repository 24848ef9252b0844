package session_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/model"
)

// toolCaller asks for send_message into another chat on its first call,
// then answers with what the tool said; it records the tools it was offered.
type toolCaller struct {
	mu      sync.Mutex
	offered [][]string
}

func (p *toolCaller) Complete(_ context.Context, req model.Request) (model.Response, error) {
	p.mu.Lock()
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
	}
	p.offered = append(p.offered, names)
	p.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		return model.Response{Text: "tool said: " + last.Text}, nil
	}
	return model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "send_message", Arguments: `{"to":"channel:c2","text":"from the job"}`}}}, nil
}

// TestInChatJobTurnCannotSendElsewhere: Rule 2 - an in-chat job's turn
// delivers only into its own chat. It is not offered send_message, and a
// call to it is refused with a reason; nothing reaches another chat.
// A user's turn in the same chat still has the tool.
func TestInChatJobTurnCannotSendElsewhere(t *testing.T) {
	t.Parallel()
	p := &toolCaller{}
	f := newFixture(t, fixtureOptions{provider: p})
	key, ids, err := f.m.RunJobTurn(context.Background(), session.JobTurn{Conversation: ref("c1"), DeliveryID: "job:j1:run:r1",
		Trigger: "⏰ digest: post the digest", Meta: map[string]string{"jobId": "j1"}})
	if err != nil || len(ids) != 2 || key != keyOf("c1") {
		t.Fatalf("job turn: key %s ids %v err %v", key, ids, err)
	}
	if sent := f.sender.to("c2"); len(sent) != 0 {
		t.Fatalf("the in-chat job posted into another chat: %+v", sent)
	}
	p.mu.Lock()
	jobOffered := slices.Clone(p.offered[0])
	p.mu.Unlock()
	if slices.Contains(jobOffered, "send_message") {
		t.Fatalf("job turn offered %v", jobOffered)
	}
	own := texts(f.entries(keyOf("c1")))
	if len(own) != 2 || !strings.Contains(own[1], `tool "send_message" is not available here`) {
		t.Fatalf("c1 entries %q", own)
	}
	// A user's turn is offered the tool as before.
	f.say(ref("c1"), "hello")
	f.settle()
	p.mu.Lock()
	userOffered := slices.Clone(p.offered[len(p.offered)-2])
	p.mu.Unlock()
	if !slices.Contains(userOffered, "send_message") {
		t.Fatalf("user turn offered %v", userOffered)
	}
}

// TestJobTurnInBoundChatNamesItsSession (issue 28 item 4): a job whose chat
// is bound to another session runs its turn in that session, and says so:
// the run record names the session whose transcript holds the trigger and
// the reply, not the chat's own.
func TestJobTurnInBoundChatNamesItsSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	bound := "agent:main:subagent:focused"
	focus(t, f, bound, "t1")
	key, ids, err := f.m.RunJobTurn(context.Background(), session.JobTurn{Conversation: threadRef("t1", "c1"), DeliveryID: "job:j1:run:r1",
		Trigger: "⏰ digest: post the digest", Meta: map[string]string{"jobId": "j1"}})
	if err != nil || len(ids) != 2 {
		t.Fatalf("job turn: ids %v err %v", ids, err)
	}
	if key != bound {
		t.Fatalf("job turn ran in %s by its own account, want the bound session %s", key, bound)
	}
	if got := f.entries(bound); len(got) != 2 || got[0].MessageIDs[0] != ids[0] {
		t.Fatalf("bound session entries %+v, want the trigger and the reply", got)
	}
}
