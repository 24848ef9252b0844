package platform_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/agentroute"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/platform"
)

// fakeDir answers from maps: access by "user/conversation", members by user.
type fakeDir struct {
	access  map[string]authz.Access
	members map[string]authz.Member
}

func (d fakeDir) Access(_ context.Context, userID string, conv binding.ConversationRef) (authz.Access, error) {
	return d.access[userID+"/"+conv.ConversationID], nil
}

func (d fakeDir) Member(_ context.Context, userID string, _ binding.ConversationRef) (authz.Member, bool, error) {
	m, ok := d.members[userID]
	return m, ok, nil
}

type platformThreads struct{ name string }

func (p platformThreads) CreateThread(_ context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error) {
	return binding.ConversationRef{Channel: p.name, ConversationID: name, ParentConversationID: parent.ConversationID}, nil
}

type countingTypist struct{ n *int }

func (c countingTypist) Typing(context.Context, binding.ConversationRef) error { *c.n++; return nil }

// TestDirectoriesAskTheConversationsPlatform: with a directory per platform,
// a permission question about a conversation goes to its platform's
// directory only (the Discord directory's yes for an id that happens to
// match is never heard), and a platform without one is refused, saying so
// (not "try again": it never works).
func TestDirectoriesAskTheConversationsPlatform(t *testing.T) {
	full := authz.Access{Exists: true, UserView: true, UserSend: true, BotView: true, BotSend: true}
	room := binding.ConversationRef{Channel: "matrix", ConversationID: "!r:example.org"}
	a := authz.New(authz.Config{}, platform.New(
		platform.Platform{Name: "discord", Directory: fakeDir{access: map[string]authz.Access{"bob/open": full, "bob/!r:example.org": full},
			members: map[string]authz.Member{"bob": {ManageGuild: true}}}},
		platform.Platform{Name: "Matrix", Directory: fakeDir{access: map[string]authz.Access{"@alice:example.org/!r:example.org": full, "bob/!r:example.org": {Exists: true}},
			members: map[string]authz.Member{"@alice:example.org": {ManageGuild: true}}}},
	))
	ctx := t.Context()
	tests := []struct {
		name, user string
		conv       binding.ConversationRef
		refusal    string // "" = allowed
	}{
		{"discord user in discord", "bob", binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "open"}, ""},
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

// TestPlatformDispatch: a thread is created, and typing shown, on the
// conversation's own platform; a platform without threads refuses
// permanently (no fallback to another platform), one without typing
// shows none; a platform without a sender is refused, naming those there are.
func TestPlatformDispatch(t *testing.T) {
	ctx := context.Background()
	n := 0
	table := platform.New(platform.Platform{Name: "discord", Threads: platformThreads{"discord"}},
		platform.Platform{Name: "matrix", Threads: platformThreads{"matrix"}, Typist: countingTypist{&n}})
	for _, name := range []string{"discord", "Matrix"} {
		got, err := table.CreateThread(ctx, binding.ConversationRef{Channel: name, ConversationID: "p"}, "t")
		want := (binding.ConversationRef{Channel: name}).Normalize().Channel
		if err != nil || got.Normalize().Channel != want {
			t.Fatalf("%s: thread %+v, err %v", name, got, err)
		}
	}
	discordOnly := platform.New(platform.Platform{Name: "discord", Threads: platformThreads{"discord"}})
	if _, err := discordOnly.CreateThread(ctx, binding.ConversationRef{Channel: "matrix", ConversationID: "!r:x"}, "t"); !errors.Is(err, delivery.ErrRejected) {
		t.Fatalf("a platform without threads: err %v, want ErrRejected", err)
	}
	for _, name := range []string{"discord", "matrix", "slack"} {
		if err := table.Typing(ctx, binding.ConversationRef{Channel: name, ConversationID: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Fatalf("typing shown %d times, want once (matrix only)", n)
	}
	_, err := table.Send(ctx, delivery.Delivery{ID: "d9", Target: binding.ConversationRef{Channel: "discord", ConversationID: "c1"}})
	if !errors.Is(err, delivery.ErrUnknownPlatform) || !errors.Is(err, delivery.ErrRejected) ||
		!strings.Contains(err.Error(), `send d9: platform "discord": no sender for the destination's platform (this process posts to: none)`) {
		t.Fatalf("no sender: %v", err)
	}
}

// placesOf is a strict fake Locator of one platform: asked about another
// platform's conversation it fails the test.
type placesOf struct {
	t        *testing.T
	platform string
	places   map[string]agentroute.Place
}

func (p placesOf) Place(ref binding.ConversationRef) agentroute.Place {
	if ref.Normalize().Channel != p.platform {
		p.t.Errorf("the %s locator was asked about a %s conversation", p.platform, ref.Channel)
	}
	return p.places[ref.ConversationID]
}

// TestPlacesAskTheConversationsPlatform: where a conversation sits (for
// agents[].channels) comes from its own platform's Locator, the one table;
// a platform without a Locator, or one the table lacks, knows nothing.
func TestPlacesAskTheConversationsPlatform(t *testing.T) {
	where := agentroute.Place{Server: "g1", Category: "cat"}
	table := platform.New(
		platform.Platform{Name: "discord", Locator: placesOf{t, "discord", map[string]agentroute.Place{"c1": where}}},
		platform.Platform{Name: "matrix"},
	)
	for _, tc := range []struct {
		name string
		ref  binding.ConversationRef
		want agentroute.Place
	}{
		{"its platform's locator", binding.ConversationRef{Channel: "Discord ", ConversationID: "c1"}, where},
		{"unknown to its locator", binding.ConversationRef{Channel: "discord", ConversationID: "c2"}, agentroute.Place{}},
		{"a platform without a locator, same id", binding.ConversationRef{Channel: "matrix", ConversationID: "c1"}, agentroute.Place{}},
		{"a platform the table lacks", binding.ConversationRef{Channel: "slack", ConversationID: "c1"}, agentroute.Place{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := table.Place(tc.ref); got != tc.want {
				t.Fatalf("Place(%+v) = %+v, want %+v", tc.ref, got, tc.want)
			}
		})
	}
}
