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

// A user replying to a bot message gives the model a note built from the
// transcript entry holding that message id: a job's id and name, a
// subagent's label, or the bot's own reply.
func TestReplyContextFromTranscriptEntry(t *testing.T) {
	t.Parallel()
	p := &modeltest.Scripted{Fallback: echoFallback}
	f := newFixture(t, fixtureOptions{provider: p})
	ctx := context.Background()
	c := ref("c1")

	job, err := f.out.Deliver(ctx, delivery.Delivery{ID: "job:j1:run:1", Target: c, Text: "Daily digest: 3 open PRs",
		Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main", Meta: map[string]string{"jobId": "j1", "jobName": "digest", "schedule": "every 1h"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := f.m.Spawn(ctx, spawnReq("scout", false, c))
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	var subMsg string
	for _, e := range f.entries(keyOf("c1")) {
		if e.Source == transcript.SourceAnnounce {
			subMsg = e.MessageIDs[0]
		}
	}
	f.say(c, "hello")
	f.settle()
	turnMsg := f.sender.to("c1")[len(f.sender.to("c1"))-1]
	turnID := f.sender.idOf(turnMsg.ID)

	for _, tc := range []struct {
		name, replyTo string
		want          []string
	}{
		{"job", job.MessageIDs[0], []string{"[in reply to message " + job.MessageIDs[0] + " posted by scheduled job j1 \"digest\" (schedule every 1h): \"Daily digest: 3 open PRs\"]"}},
		{"subagent", subMsg, []string{"[in reply to message " + subMsg + " result of subagent scout (" + sub.Key + "):", "Done: do scout"}},
		{"turn", turnID, []string{"[in reply to message " + turnID + " your reply: \"echo: hello\"]"}},
	} {
		f.reply(c, tc.replyTo, "stop this")
		f.settle()
		reqs := p.Requests()
		msgs := reqs[len(reqs)-1].Messages
		last := msgs[len(msgs)-1]
		if last.Role != model.RoleUser || !strings.HasSuffix(last.Text, "\nstop this") {
			t.Fatalf("%s: last message = %+v", tc.name, last)
		}
		for _, w := range tc.want {
			if !strings.Contains(last.Text, w) {
				t.Errorf("%s: request text %q lacks %q", tc.name, last.Text, w)
			}
		}
	}
	// The stored user entry stays exactly as displayed.
	es := f.entries(keyOf("c1"))
	if e := es[len(es)-2]; e.Text != "stop this" || e.Meta["replyTo"] != turnID {
		t.Fatalf("stored entry = %+v", e)
	}
	// Earlier non-turn entries carry their provenance in the request.
	reqs := p.Requests()
	first := reqs[len(reqs)-1].Messages[0]
	if first.Role != model.RoleAssistant || !strings.HasPrefix(first.Text, "[posted by scheduled job j1") {
		t.Fatalf("job entry in the request = %+v", first)
	}
}

// /reset starts a new generation; a subagent started before the reset
// delivers into the same chat's current generation.
func TestResetKeepsLateResultsInTheSameChat(t *testing.T) {
	t.Parallel()
	g := newGate(echo.New())
	f := newFixture(t, fixtureOptions{provider: g})
	ctx := context.Background()
	c := ref("c1")
	f.say(c, "before")
	g.waitEntered(t)
	g.release <- struct{}{}
	f.settle()
	res, err := f.m.Spawn(ctx, spawnReq("late", false, c))
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	key, err := f.m.Reset(ctx, c)
	if err != nil || key != keyOf("c1") {
		t.Fatalf("reset = %q, %v", key, err)
	}
	if in, _ := f.m.Info(key); in.Generation != 1 {
		t.Fatalf("registry generation = %d", in.Generation)
	}
	g.release <- struct{}{}
	f.settle()
	f.say(c, "after")
	req := g.waitEntered(t)
	g.release <- struct{}{}
	f.settle()

	var gens []string
	for _, e := range f.entries(key) {
		gens = append(gens, string(rune('0'+e.Generation))+"|"+string(e.Source))
	}
	if want := []string{"0|user", "0|turn", "1|announce", "1|user", "1|turn"}; !slices.Equal(gens, want) {
		t.Fatalf("generations = %q, want %q", gens, want)
	}
	// The model sees only the current generation: the late result and the new message.
	if len(req.Messages) != 2 || !strings.Contains(req.Messages[0].Text, "late finished") || req.Messages[1].Text != "after" {
		t.Fatalf("request after reset = %+v", req.Messages)
	}
	_ = res
}
