package session_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
)

type platformThreads struct{ name string }

func (p platformThreads) CreateThread(_ context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error) {
	return binding.ConversationRef{Channel: p.name, ConversationID: name, ParentConversationID: parent.ConversationID}, nil
}

type countingTypist struct{ n *int }

func (c countingTypist) Typing(context.Context, binding.ConversationRef) error { *c.n++; return nil }

// TestPlatformDispatch: a thread is created, and typing shown, on the
// conversation's own platform; a platform without threads refuses
// permanently (no fallback to another platform), one without typing
// shows none.
func TestPlatformDispatch(t *testing.T) {
	ctx := context.Background()
	threads := session.ThreadsByPlatform{"discord": platformThreads{"discord"}, "matrix": platformThreads{"matrix"}}
	for _, platform := range []string{"discord", "Matrix"} {
		got, err := threads.CreateThread(ctx, binding.ConversationRef{Channel: platform, ConversationID: "p"}, "t")
		want := (binding.ConversationRef{Channel: platform}).Normalize().Channel
		if err != nil || got.Normalize().Channel != want {
			t.Fatalf("%s: thread %+v, err %v", platform, got, err)
		}
	}
	if _, err := (session.ThreadsByPlatform{"discord": platformThreads{"discord"}}).CreateThread(ctx, binding.ConversationRef{Channel: "matrix", ConversationID: "!r:x"}, "t"); !errors.Is(err, delivery.ErrRejected) {
		t.Fatalf("a platform without threads: err %v, want ErrRejected", err)
	}
	n := 0
	typists := session.TypistsByPlatform{"matrix": countingTypist{&n}}
	for _, platform := range []string{"discord", "matrix"} {
		if err := typists.Typing(ctx, binding.ConversationRef{Channel: platform, ConversationID: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Fatalf("typing shown %d times, want once (matrix only)", n)
	}
}
