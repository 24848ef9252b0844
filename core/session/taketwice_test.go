package session_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/store/memory"
)

// holdingRegistry holds the first write of a session record that owes the
// turn of message id, until release is closed: a slow store write between
// the moment a message is marked taken and its user entry.
type holdingRegistry struct {
	*memory.Sessions
	id      string
	held    atomic.Bool
	release chan struct{}
}

func (r *holdingRegistry) PutSessionInfo(ctx context.Context, in session.Info) error {
	if slices.ContainsFunc(in.Pending, func(p session.PendingTurn) bool { return p.Message.MessageID == r.id }) {
		if r.held.CompareAndSwap(false, true) { // only the first: later writes pass
			<-r.release
		}
	}
	return r.Sessions.PutSessionInfo(ctx, in)
}

// TestMessageTakenTwiceKeepsDisplayOrder: after a restart, a message owed
// by the previous process is taken by Resume and by the conversation's
// catch-up lane, which goes on with the next message. The lane must not
// write the next message's user entry while Resume is still writing the
// owed one's (Rule 1: user entries in display order). On the old code the
// lane found the owed message marked taken, skipped it and wrote the next
// one first (cmd/bot TestCrashRestartLosesNothing: "entry #14 (user) is
// out of display order").
func TestMessageTakenTwiceKeepsDisplayOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &holdingRegistry{Sessions: memory.NewSessions(), id: "201", release: make(chan struct{})}
		f := newFixture(t, fixtureOptions{regStore: reg})
		ctx := context.Background()
		msg := func(id, text string) session.Message {
			return session.Message{Conversation: ref("c1"), MessageID: id, AuthorID: "u1", AuthorName: "alice", Text: text}
		}
		errs := make(chan error, 3)
		go func() { errs <- f.m.HandleMessage(ctx, msg("201", "owed")) }() // Resume
		synctest.Wait()                                                    // its store write is held
		go func() {                                                        // the lane: the owed message again, then the next one
			errs <- f.m.HandleMessage(ctx, msg("201", "owed"))
			errs <- f.m.HandleMessage(ctx, msg("202", "next"))
		}()
		synctest.Wait()
		close(reg.release)
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		f.settle()
		var users []string
		for _, e := range f.entries(keyOf("c1")) {
			if e.Source == "user" {
				users = append(users, e.MessageIDs[0])
			}
		}
		if !slices.Equal(users, []string{"201", "202"}) {
			t.Fatalf("user entries for messages %v, want [201 202] (display order)", users)
		}
	})
}
