package authz_test

import (
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
)

// TestDirectoriesAskTheConversationsPlatform: with a directory per platform,
// a permission question about a conversation goes to its platform's
// directory only (the Discord directory's yes for an id that happens to
// match is never heard), and a platform without one is refused, saying so
// (not "try again": it never works).
func TestDirectoriesAskTheConversationsPlatform(t *testing.T) {
	full := authz.Access{Exists: true, UserView: true, UserSend: true, BotView: true, BotSend: true}
	room := binding.ConversationRef{Channel: "matrix", ConversationID: "!r:example.org"}
	a := authz.New(authz.Config{}, authz.Directories{
		"discord": fakeDir{access: map[string]authz.Access{"bob/open": full, "bob/!r:example.org": full},
			members: map[string]authz.Member{"bob": {ManageGuild: true}}},
		"Matrix": fakeDir{access: map[string]authz.Access{"@alice:example.org/!r:example.org": full, "bob/!r:example.org": {Exists: true}},
			members: map[string]authz.Member{"@alice:example.org": {ManageGuild: true}}},
	})
	ctx := t.Context()
	tests := []struct {
		name, user string
		conv       binding.ConversationRef
		refusal    string // "" = allowed
	}{
		{"discord user in discord", "bob", conv("open"), ""},
		{"matrix user in matrix", "@alice:example.org", room, ""},
		{"discord user in a matrix room", "bob", room, "the requesting user cannot view channel !r:example.org"},
		{"unknown platform", "bob", binding.ConversationRef{Channel: "slack", ConversationID: "C1"},
			"permissions in slack conversations cannot be checked here, so nothing is done there for this request"},
	}
	for _, tc := range tests {
		err := a.CanPost(ctx, tc.user, tc.conv)
		switch {
		case tc.refusal == "" && err != nil:
			t.Errorf("%s: %v, want allowed", tc.name, err)
		case tc.refusal != "" && (!authz.IsRefusal(err) || !strings.Contains(err.Error(), tc.refusal)):
			t.Errorf("%s: %v, want the refusal %q", tc.name, err, tc.refusal)
		}
	}
	if !a.Operator(ctx, authz.Actor{UserID: "@alice:example.org", Where: room}, room) || a.Operator(ctx, authz.Actor{UserID: "bob", Where: room}, room) {
		t.Error("operator standing was not asked of the room's platform")
	}
	slack := binding.ConversationRef{Channel: "slack", ConversationID: "C1"}
	if a.Operator(ctx, authz.Actor{UserID: "bob", Where: slack}, slack) {
		t.Error("an operator on a platform without a directory")
	}
}
