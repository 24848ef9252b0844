package authz_test

import (
	"context"
	"testing"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
)

// guildsDir is a hand-written Directory of two guilds: channels "a1", "a2"
// are guild A's, "b1" guild B's; members are per guild, so a user's
// standing depends on the conversation asked about (as Discord's does).
type guildsDir struct {
	members map[string]map[string]authz.Member // guild -> user -> member
}

func guildOf(conv binding.ConversationRef) string {
	switch conv.ConversationID {
	case "a1", "a2":
		return "A"
	case "b1":
		return "B"
	}
	return ""
}

func (d guildsDir) Access(_ context.Context, userID string, conv binding.ConversationRef) (authz.Access, error) {
	if _, ok := d.members[guildOf(conv)][userID]; !ok {
		return authz.Access{Exists: true, BotView: true, BotSend: true}, nil
	}
	return full, nil
}

func (d guildsDir) Member(_ context.Context, userID string, conv binding.ConversationRef) (authz.Member, bool, error) {
	m, ok := d.members[guildOf(conv)][userID]
	return m, ok, nil
}

// twoGuilds: ownerA holds Manage Server in A, ownerB in B only (and is a
// plain member of A), modA holds role r-mod in A.
func twoGuilds() guildsDir {
	return guildsDir{members: map[string]map[string]authz.Member{
		"A": {"ownerA": {ManageGuild: true}, "ownerB": {}, "modA": {Roles: []string{"r-mod"}}, "victim": {}},
		"B": {"ownerB": {ManageGuild: true}},
	}}
}

// TestOperatorIsScopedToTheTargetsServer: an operator of guild B is nobody
// for guild A's conversations or anyone's DM, wherever they act from; a DM
// belongs to its user alone, configured operators included; only
// configured operator users cross servers.
func TestOperatorIsScopedToTheTargetsServer(t *testing.T) {
	t.Parallel()
	dir := twoGuilds()
	ownerB := authz.Actor{UserID: "ownerB", Where: conv("b1")}
	tests := []struct {
		name   string
		cfg    authz.Config
		actor  authz.Actor
		target string
		want   bool
	}{
		{"B's owner, B's channel", authz.Config{}, ownerB, "b1", true},
		{"B's owner acting in B, A's channel", authz.Config{}, ownerB, "a1", false},
		{"B's owner acting in A, A's channel", authz.Config{}, authz.Actor{UserID: "ownerB", Where: conv("a1")}, "a1", false},
		{"B's owner, a member's DM", authz.Config{}, ownerB, "user:victim", false},
		{"A's owner, A's channel", authz.Config{}, authz.Actor{UserID: "ownerA", Where: conv("a2")}, "a1", true},
		{"A's owner, A's member's DM", authz.Config{}, authz.Actor{UserID: "ownerA", Where: conv("a1")}, "user:victim", false},
		{"A's owner, own DM (not configured)", authz.Config{}, authz.Actor{UserID: "ownerA", Where: conv("a1")}, "user:ownerA", false},
		{"no target: nobody but configured users", authz.Config{}, authz.Actor{UserID: "ownerA", Where: conv("a1")}, "", false},
		{"operator role of A, in A", authz.Config{OperatorRoles: []string{"r-mod"}}, authz.Actor{UserID: "modA", Where: conv("b1")}, "a1", true},
		{"operator role of A, for B", authz.Config{OperatorRoles: []string{"r-mod"}}, authz.Actor{UserID: "modA", Where: conv("a1")}, "b1", false},
		{"configured user, any server", authz.Config{OperatorUsers: []string{"root"}}, authz.Actor{UserID: "root", Where: conv("b1")}, "a1", true},
		{"configured user, no target", authz.Config{OperatorUsers: []string{"root"}}, authz.Actor{UserID: "root", Where: conv("b1")}, "", true},
		{"configured user, own DM", authz.Config{OperatorUsers: []string{"root"}}, authz.Actor{UserID: "root", Where: conv("user:root")}, "user:root", true},
		{"configured user, someone else's DM", authz.Config{OperatorUsers: []string{"root"}}, authz.Actor{UserID: "root", Where: conv("a1")}, "user:victim", false},
	}
	for _, tc := range tests {
		a := authz.New(tc.cfg, dir)
		if got := a.Operator(t.Context(), tc.actor, conv(tc.target)); got != tc.want {
			t.Errorf("%s: Operator = %v, want %v", tc.name, got, tc.want)
		}
		err := a.RequireOperator(t.Context(), tc.actor, conv(tc.target), "remove jobs")
		if (err == nil) != tc.want || (err != nil && !authz.IsRefusal(err)) {
			t.Errorf("%s: RequireOperator = %v, want allowed %v", tc.name, err, tc.want)
		}
	}
}

// TestScopedFocusStopAndHostPower: /focus and /stop ask with the target's
// conversation; power over the host (ACP agents, operator-only MCP
// servers) comes only from configured operator users or the resource's
// own lists, never from Manage Server or an operator role.
func TestScopedFocusStopAndHostPower(t *testing.T) {
	t.Parallel()
	dir := twoGuilds()
	a := authz.New(authz.Config{}, dir)
	ownerB := authz.Actor{UserID: "ownerB", Where: conv("b1")}
	ownerA := authz.Actor{UserID: "ownerA", Where: conv("a1")}
	hiddenA := authz.FocusTarget{Key: "agent:main:discord:channel:a2", Kind: "main", Conversation: conv("a2")}
	victimDM := authz.FocusTarget{Key: "agent:main:discord:dm:victim", Kind: "main", Conversation: conv("user:victim")}
	dmSubagent := authz.FocusTarget{Key: "agent:main:subagent:x", Kind: "subagent", SpawnedBy: "victim", Conversation: conv("user:victim")}
	for _, tc := range []struct {
		name  string
		actor authz.Actor
		t     authz.FocusTarget
		want  bool
	}{
		{"B's owner: a victim's DM", ownerB, victimDM, false},
		{"B's owner: a subagent spawned from a DM", ownerB, dmSubagent, false},
		{"A's owner: a victim's DM", ownerA, victimDM, false},
		{"A's owner: A's channel", ownerA, hiddenA, true},
	} {
		if err := a.MayFocus(t.Context(), tc.actor, tc.t); (err == nil) != tc.want {
			t.Errorf("focus %s: %v, want allowed %v", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name   string
		actor  authz.Actor
		target string
		want   bool
	}{
		{"B's owner: A's run", ownerB, "a1", false},
		{"B's owner: a DM's run", ownerB, "user:victim", false},
		{"B's owner: B's run", ownerB, "b1", true},
		{"A's owner: A's run", ownerA, "a1", true},
		{"A's owner: a member's DM run", ownerA, "user:victim", false},
	} {
		if err := a.MayStop(t.Context(), tc.actor, "victim", conv(tc.target), "the turn"); (err == nil) != tc.want {
			t.Errorf("stop %s: %v, want allowed %v", tc.name, err, tc.want)
		}
	}
	global := authz.New(authz.Config{OperatorUsers: []string{"root"}, OperatorRoles: []string{"r-mod"}}, dir)
	for _, tc := range []struct {
		name  string
		a     *authz.Authority
		actor authz.Actor
		users []string
		want  bool
	}{
		{"Manage Server in own guild", a, ownerB, nil, false},
		{"Manage Server in the agent's guild", a, ownerA, nil, false},
		{"operator role", global, authz.Actor{UserID: "modA", Where: conv("a1")}, nil, false},
		{"configured operator user", global, authz.Actor{UserID: "root", Where: conv("b1")}, nil, true},
		{"agent's own users list", a, ownerB, []string{"ownerB"}, true},
	} {
		if err := tc.a.MayUseAgent(t.Context(), tc.actor, tc.users, nil, "start codex"); (err == nil) != tc.want {
			t.Errorf("agent %s: %v, want allowed %v", tc.name, err, tc.want)
		}
		if err := tc.a.Permits(t.Context(), tc.actor, authz.Grant{Users: tc.users, Operators: true}, "the shell tools"); (err == nil) != tc.want {
			t.Errorf("operators-only MCP %s: %v, want allowed %v", tc.name, err, tc.want)
		}
	}
}
