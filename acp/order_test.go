package acp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// An ACP turn owns its live messages as a core/session turn does (issue
// 27, the soak's "order of an ACP turn's messages"): another bot message
// in the thread while the turn runs (a notice, a message of the session a
// /focus moved the thread to, a recovered post) comes after the turn's
// messages on the screen and in the transcript, and the turn's entries go
// to the session that owned the turn when it started.

// noticeDuringTurn posts a notice in the thread through the turn's
// Outbound once the turn waits on its permission request, and returns
// the channel its result arrives on. The notice has been tried (its text
// went to the redactor, before the conversation's send lock) when it
// returns.
func noticeDuringTurn(t *testing.T, f *fixture, thread binding.ConversationRef) <-chan error {
	t.Helper()
	f.waitShown("asks permission")
	done := make(chan error, 1)
	go func() {
		_, err := f.out.Deliver(context.Background(), delivery.Delivery{ID: "notice-1", Target: thread, Text: "ℹ️ a notice mid-turn",
			Producer: delivery.Producer{Source: transcript.SourceNotice}}, nil)
		done <- err
	}()
	f.h.wait(t, "the notice tried", func() bool { return f.sent.seen("a notice mid-turn") })
	return done
}

// allow clicks the permission request's first option as the binder.
func allow(t *testing.T, f *fixture) {
	t.Helper()
	m := f.waitShown("asks permission")
	if r := f.m.Choose(context.Background(), m.buttons[0].CustomID, "alice", channel); r != "" {
		t.Fatalf("binder refused: %s", r)
	}
}

// waitNotice waits for the notice's Deliver and its display.
func waitNotice(t *testing.T, f *fixture, done <-chan error) shownMsg {
	t.Helper()
	var err error
	f.h.wait(t, "the notice delivered", func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if err != nil {
		t.Fatalf("notice: %v", err)
	}
	return f.waitShown("a notice mid-turn")
}

// A notice posted while the turn's first messages are displayed and the
// turn goes on: the transcript's order is the display order.
func TestNoticeMidTurnKeepsDisplayOrder(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "say working on it\nask p1 Write notes.txt\nwrite notes.txt hello\nsay done")
	done := noticeDuringTurn(t, f, res.Thread)
	allow(t, f)
	n := waitNotice(t, f, done)
	f.waitShown("done")
	// Every message displayed (the intro is not Outbound's here).
	es := f.waitEntries(res.SessionKey, len(f.live.snapshot()))
	f.checkRule1(res.SessionKey)
	shown := f.live.snapshot()
	if last := shown[len(shown)-1]; last.id != n.id {
		t.Errorf("the notice is displayed amid the turn's messages: %q", texts(shown))
	}
	if last := es[len(es)-1]; last.DeliveryID != "notice-1" {
		t.Errorf("last entry %q (%s), want the notice's", last.Text, last.DeliveryID)
	}
}

// The thread's binding moves (/focus) while the turn runs: every message
// of the turn is in the session that owned the turn, in display order;
// what the thread shows after the move is the new session's.
func TestFocusMidTurnKeepsTurnInItsSession(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "say working on it\nask p1 Write notes.txt\nwrite notes.txt hello\nsay done")
	f.waitShown("asks permission")
	// /focus: the thread routes to another session of the same agent name
	// from now on (a channel session, say).
	other := "agent:script:discord:default:channel:c9"
	if _, err := f.binds.Bind(context.Background(), binding.BindInput{Conversation: res.Thread, TargetSessionKey: other,
		TargetKind: binding.KindSession, AgentID: "script", BoundBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	done := noticeDuringTurn(t, f, res.Thread)
	allow(t, f)
	n := waitNotice(t, f, done)
	f.waitShown("done")
	// Every message displayed but the notice.
	es := f.waitEntries(res.SessionKey, len(f.live.snapshot())-1)
	var turn []string
	for _, e := range es {
		if e.Source == transcript.SourceTurn {
			turn = append(turn, e.Text)
		}
	}
	if len(turn) != len(es) || !strings.Contains(strings.Join(turn, " "), "done") {
		t.Errorf("the turn's entries in its session: %q", turn)
	}
	checkSessions(t, f, res.SessionKey, other)
	moved := f.entries(other)
	if len(moved) != 1 || len(moved[0].MessageIDs) != 1 || moved[0].MessageIDs[0] != n.id {
		t.Errorf("the new session holds %d entries, want the notice alone: %+v", len(moved), moved)
	}
	if shown := f.live.snapshot(); shown[len(shown)-1].id != n.id {
		t.Errorf("the notice is displayed amid the turn's messages: %q", texts(shown))
	}
}

// A recovery pass while a turn holds its thread (waiting on a person) does
// not wait for the turn: it leaves the thread's unfinished deliveries to a
// later pass.
func TestRecoveryDoesNotWaitOnHeldThread(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "say working on it\nask p1 Write notes.txt\nwrite notes.txt hello")
	f.waitShown("asks permission")
	// A notice whose first attempt failed transiently is pending there.
	if err := f.store.PutDelivery(context.Background(), delivery.Record{Delivery: delivery.Delivery{ID: "old-notice", Target: res.Thread,
		Text: "ℹ️ an older notice", Producer: delivery.Producer{Source: transcript.SourceNotice}}, State: delivery.StatePending}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	passed := make(chan result, 1)
	go func() {
		n, err := f.out.Recover(context.Background(), f.timers.clk.Now().Add(time.Hour))
		passed <- result{n, err}
		f.h.changed()
	}()
	var r result
	f.h.wait(t, "the recovery pass", func() bool {
		select {
		case r = <-passed:
			return true
		default:
			return false
		}
	})
	if r.err != nil || r.n != 0 {
		t.Fatalf("recovery pass: %d recovered, %v; want 0 (the thread is held)", r.n, r.err)
	}
	allow(t, f)
	f.waitShown("wrote notes.txt")
	f.waitEntries(res.SessionKey, len(f.live.snapshot()))
	if _, ok := f.live.find("an older notice"); ok {
		t.Error("the pending notice was displayed amid the turn")
	}
	f.checkRule1(res.SessionKey)
}

// checkSessions is checkRule1 over several sessions displayed in one
// thread: every displayed message is in exactly one entry of them, with
// its text, and each session's entries are in display order.
func checkSessions(t *testing.T, f *fixture, keys ...string) {
	t.Helper()
	shown := map[string]shownMsg{}
	for _, m := range f.live.snapshot() {
		shown[m.id] = m
	}
	for _, key := range keys {
		last := ""
		for _, e := range f.entries(key) {
			if e.Role != transcript.RoleAssistant || len(e.MessageIDs) != 1 {
				continue
			}
			id := e.MessageIDs[0]
			m, ok := shown[id]
			switch {
			case !ok:
				t.Errorf("%s: entry %d names message %s, not displayed or in another entry", key, e.Seq, id)
			case m.text != e.Text:
				t.Errorf("%s: entry %d text %q, display %q", key, e.Seq, e.Text, m.text)
			case id < last:
				t.Errorf("%s: entry %d (%s) after %s: out of display order", key, e.Seq, id, last)
			}
			last = max(last, id)
			delete(shown, id)
		}
	}
	for id, m := range shown {
		t.Errorf("message %s %q is in no entry", id, m.text)
	}
}
