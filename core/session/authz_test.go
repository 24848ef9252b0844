package session_test

import (
	"context"
	"slices"
	"strings"
	"testing"

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

// A job run's tools act for the job's creator, in the job's chat.
func TestJobTurnToolsActForCreator(t *testing.T) {
	t.Parallel()
	auth := &fakeAuthority{}
	f := newFixture(t, fixtureOptions{authority: auth})
	_, err := f.m.RunJobTurn(context.Background(), session.JobTurn{Conversation: ref("c1"), DeliveryID: "job:j1:run:r1",
		Trigger: "⏰ relay:\n!tool send_message {\"to\":\"channel:c2\",\"text\":\"from the job\"}", CreatedBy: "creator9"})
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	if got := auth.calls(); !slices.Equal(got, []string{"creator9>c2"}) {
		t.Fatalf("authority asked %q, want the job's creator", got)
	}
	// A job with no recorded creator acts for nobody: refused.
	_, err = f.m.RunJobTurn(context.Background(), session.JobTurn{Conversation: ref("c1"), DeliveryID: "job:j2:run:r1",
		Trigger: "⏰ relay:\n!tool send_message {\"to\":\"channel:c3\",\"text\":\"orphan\"}"})
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	if sent := f.sender.to("c3"); len(sent) != 0 {
		t.Fatalf("a creatorless job sent into c3: %+v", sent)
	}
}
