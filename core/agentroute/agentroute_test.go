package agentroute_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/agentroute"
	"github.com/agentbot/agentbot/core/binding"
)

// places is a strict fake of the platform table's Locator: it knows the
// Discord channels it was given and nothing else (an unknown conversation,
// or one of another platform, is the zero Place, as the table answers).
type places map[string]agentroute.Place

func (p places) Place(ref binding.ConversationRef) agentroute.Place {
	if ref.Channel != "discord" {
		return agentroute.Place{}
	}
	return p[ref.ConversationID]
}

func ref(platform, id, parent string) binding.ConversationRef {
	return binding.ConversationRef{Channel: platform, ConversationID: id, ParentConversationID: parent}
}

func TestResolveMostSpecificWins(t *testing.T) {
	discord := places{
		"c-general": {Server: "g1", Category: "cat-eng"},
		"c-review":  {Server: "g1", Category: "cat-eng"},
		"c-lobby":   {Server: "g1"},
		"c-other":   {Server: "g2"},
		"t-1":       {Server: "g1", Category: "cat-eng", Parent: "c-review"}, // a thread the ref names alone
	}
	table, err := agentroute.New("main", []agentroute.Claim{
		{Agent: "scribe", IDs: []string{"c-review"}},
		{Agent: "eng", IDs: []string{"cat-eng"}},
		{Agent: "g1bot", IDs: []string{"g1"}},
		{Agent: "room", IDs: []string{"!r:example.org"}},
	}, discord)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ref  binding.ConversationRef
		want agentroute.Route
	}{
		{"channel claimed itself", ref("discord", "c-review", ""), agentroute.Route{Agent: "scribe", By: agentroute.ByConversation, ID: "c-review"}},
		{"thread follows its parent (ref carries it)", ref("discord", "t-9", "c-review"), agentroute.Route{Agent: "scribe", By: agentroute.ByParent, ID: "c-review"}},
		{"thread follows its parent (from the cache)", ref("discord", "t-1", ""), agentroute.Route{Agent: "scribe", By: agentroute.ByParent, ID: "c-review"}},
		{"category beats server", ref("discord", "c-general", ""), agentroute.Route{Agent: "eng", By: agentroute.ByCategory, ID: "cat-eng"}},
		{"server", ref("discord", "c-lobby", ""), agentroute.Route{Agent: "g1bot", By: agentroute.ByServer, ID: "g1"}},
		{"another server: default", ref("discord", "c-other", ""), agentroute.Route{Agent: "main", By: agentroute.ByDefault}},
		{"unknown channel: default", ref("discord", "c-unknown", ""), agentroute.Route{Agent: "main", By: agentroute.ByDefault}},
		{"dm: default, whatever is claimed", ref("discord", "user:g1", ""), agentroute.Route{Agent: "main", By: agentroute.ByDM}},
		{"matrix room (no locator)", ref("matrix", "!r:example.org", ""), agentroute.Route{Agent: "room", By: agentroute.ByConversation, ID: "!r:example.org"}},
		{"matrix thread follows its room", ref("matrix", "$ev", "!r:example.org"), agentroute.Route{Agent: "room", By: agentroute.ByParent, ID: "!r:example.org"}},
		{"matrix dm", ref("matrix", "user:@a:example.org", ""), agentroute.Route{Agent: "main", By: agentroute.ByDM}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := table.Resolve(tc.ref); got != tc.want {
				t.Fatalf("Resolve = %+v, want %+v", got, tc.want)
			}
			if got := table.Agent(tc.ref); got != tc.want.Agent {
				t.Fatalf("Agent = %q, want %q", got, tc.want.Agent)
			}
			if tc.want.ID != "" && !strings.Contains(tc.want.Why(), tc.want.ID) {
				t.Fatalf("Why %q does not name %s", tc.want.Why(), tc.want.ID)
			}
		})
	}
}

func TestNewRefusesAnIDClaimedByTwoAgents(t *testing.T) {
	_, err := agentroute.New("main", []agentroute.Claim{
		{Agent: "main", IDs: []string{"a"}},
		{Agent: "scribe", IDs: []string{"b", "a"}},
	}, nil)
	var o *agentroute.OverlapError
	if !errors.As(err, &o) || o.ID != "a" || o.First != "main" || o.Second != "scribe" {
		t.Fatalf("err = %v (%+v), want an overlap of a between main and scribe", err, o)
	}
	// One agent naming an id twice is no overlap.
	if _, err := agentroute.New("main", []agentroute.Claim{{Agent: "scribe", IDs: []string{"a", "a"}}}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestNoClaimsAsksNoLocator(t *testing.T) {
	table, err := agentroute.New("main", nil, panicking{})
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Resolve(ref("discord", "c", "")); got.Agent != "main" || got.By != agentroute.ByDefault {
		t.Fatalf("Resolve = %+v", got)
	}
}

type panicking struct{}

func (panicking) Place(binding.ConversationRef) agentroute.Place {
	panic("no claims: nothing to look up")
}
