package platform_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/platform"
)

type recordingDeleter struct{ got *[]string }

func (d recordingDeleter) DeleteMessage(_ context.Context, conv binding.ConversationRef, id string) error {
	*d.got = append(*d.got, conv.Normalize().Channel+"/"+id)
	return nil
}

// TestDeleteMessageOnTheConversationsPlatform: a deletion goes to the
// conversation's own platform; one without a deleter refuses (permanent).
func TestDeleteMessageOnTheConversationsPlatform(t *testing.T) {
	var got []string
	tb := platform.New(platform.Platform{Name: "discord", Deleter: recordingDeleter{&got}}, platform.Platform{Name: "matrix"})
	ctx := context.Background()
	if err := tb.DeleteMessage(ctx, binding.ConversationRef{Channel: "Discord", ConversationID: "c1"}, "m1"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"matrix", "slack"} {
		if err := tb.DeleteMessage(ctx, binding.ConversationRef{Channel: ch, ConversationID: "c1"}, "m2"); !errors.Is(err, delivery.ErrRejected) {
			t.Errorf("%s: err = %v, want ErrRejected", ch, err)
		}
	}
	if len(got) != 1 || got[0] != "discord/m1" {
		t.Fatalf("deleted %v, want [discord/m1]", got)
	}
}
