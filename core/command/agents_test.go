package command

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/agentroute"
	"github.com/agentbot/agentbot/core/binding"
)

// TestAgentsSaysWhoAnswersHereAndWhy: /agents names the agent the route
// table gives this conversation and the claim that decided it, or the
// bound session when the conversation is bound.
func TestAgentsSaysWhoAnswersHereAndWhy(t *testing.T) {
	table, err := agentroute.New("main", []agentroute.Claim{{Agent: "scribe", IDs: []string{"chan-1"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		where binding.ConversationRef
		bound bool
		want  string
	}{
		{"claimed channel", channel, false, "answers here: agent `scribe`, because this conversation (chan-1) is in its channels\n"},
		{"thread follows its parent", thread, false, "answers here: agent `scribe`, because this thread follows its parent chan-1, which is in its channels\n"},
		{"unclaimed", ref("chan-2", ""), false, "answers here: agent `main`, because no agent's channels name this conversation"},
		{"dm", dm, false, "answers here: agent `main`, because direct messages go to the default agent\n"},
		{"bound", channel, true, "answers here: the bound session `agent:main:subagent:1` (/unfocus ends the binding; unbound, agent `scribe` answers: this conversation (chan-1) is in its channels)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.agents = table
			if tc.bound {
				w.routes = fakeRoutes{key: subKey, bound: true}
			}
			got := outcome(w.commands().Run(context.Background(), Invocation{Platform: discordWords, Conversation: tc.where, UserID: "u1", Name: "agents"}))
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("/agents =\n%s\nwant it to start with\n%s", got, tc.want)
			}
		})
	}
}
