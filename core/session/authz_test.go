package session_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/session"
)

// send_message acts for the user whose message started the turn: where
// the authority refuses, nothing is sent and nothing is written there; the
// model gets a tool result saying why (invariant 13).
func TestSendMessageRefusedWhereRequesterCannotPost(t *testing.T) {
	t.Parallel()
	auth := &fakeAuthority{deny: map[string]bool{"secret": true}}
	f := newFixture(t, fixtureOptions{authority: auth})
	f.say(ref("c1"), `!tool send_message {"to":"channel:secret","text":"leak"}`)
	f.settle()
	if sent := f.sender.to("secret"); len(sent) != 0 {
		t.Fatalf("sent into #secret: %+v", sent)
	}
	if es := f.entries(keyOf("secret")); len(es) != 0 {
		t.Fatalf("#secret transcript = %q", texts(es))
	}
	own := texts(f.entries(keyOf("c1")))
	if len(own) != 2 || !strings.Contains(own[1], "send_message: refused: the requesting user cannot view channel secret") {
		t.Fatalf("c1 entries = %q", own)
	}
	if got := auth.calls(); !slices.Equal(got, []string{"u1>secret"}) {
		t.Fatalf("authority asked %q, want the message author u1 for #secret", got)
	}
}

// Without an authority, send_message reaches only the turn's own conversation.
func TestSendMessageWithoutAuthorityStaysHome(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{authority: nilAuthority{}})
	f.say(ref("c1"), `!tool send_message {"to":"channel:c2","text":"x"}`)
	f.settle()
	if sent := f.sender.to("c2"); len(sent) != 0 {
		t.Fatalf("sent into c2: %+v", sent)
	}
}

// nilAuthority stands for "no authority wired": the fixture maps it to nil.
type nilAuthority struct{ session.Authority }

// A job run's tools act for the job's creator, in the job's chat (an
// in-chat job has no send_message: Rule 2; its job tools carry the actor).
func TestJobTurnToolsActForCreator(t *testing.T) {
	t.Parallel()
	jobs := &actorJobs{}
	f := newFixture(t, fixtureOptions{authority: &fakeAuthority{}, jobs: jobs})
	for _, jt := range []session.JobTurn{
		{Conversation: ref("c1"), DeliveryID: "job:j1:run:r1", Trigger: "⏰ list:\n!tool list_jobs {}", CreatedBy: "creator9"},
		{Conversation: ref("c1"), DeliveryID: "job:j2:run:r1", Trigger: "⏰ list:\n!tool list_jobs {}"}, // no recorded creator
	} {
		if _, err := f.m.RunJobTurn(context.Background(), jt); err != nil {
			t.Fatal(err)
		}
		f.settle()
	}
	want := []authz.Actor{{UserID: "creator9", Where: ref("c1")}, {UserID: "", Where: ref("c1")}}
	if got := jobs.seen(); len(got) != 2 || got[0].UserID != want[0].UserID || got[1].UserID != "" ||
		got[0].Where.ConversationID != "c1" || got[1].Where.ConversationID != "c1" {
		t.Fatalf("job tools acted as %+v, want %+v (the creator, then nobody)", got, want)
	}
}

// actorJobs records who each job tool call acts for.
type actorJobs struct {
	mu     sync.Mutex
	actors []authz.Actor
}

func (j *actorJobs) seen() []authz.Actor {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.actors)
}

func (j *actorJobs) record(a authz.Actor) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.actors = append(j.actors, a)
}

func (j *actorJobs) ScheduleJob(_ context.Context, a authz.Actor, _ session.JobRequest) (string, error) {
	j.record(a)
	return "", nil
}

func (j *actorJobs) ListJobs(_ context.Context, a authz.Actor) (string, error) {
	j.record(a)
	return "no jobs", nil
}

func (j *actorJobs) CancelJob(_ context.Context, a authz.Actor, _ string) (string, error) {
	j.record(a)
	return "", nil
}
