package authz_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
)

// fakeDir is a hand-written Directory: access per user and channel id,
// members per user id.
type fakeDir struct {
	access  map[string]authz.Access // "user/channel"
	members map[string]authz.Member // user
	err     error
}

func (d fakeDir) Access(_ context.Context, userID string, conv binding.ConversationRef) (authz.Access, error) {
	if d.err != nil {
		return authz.Access{}, d.err
	}
	return d.access[userID+"/"+conv.ConversationID], nil
}

func (d fakeDir) Member(_ context.Context, userID string, _ binding.ConversationRef) (authz.Member, bool, error) {
	if d.err != nil {
		return authz.Member{}, false, d.err
	}
	m, ok := d.members[userID]
	return m, ok, nil
}

func conv(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id}
}

var full = authz.Access{Exists: true, UserView: true, UserSend: true, BotView: true, BotSend: true, Name: "#c"}

func TestOperator(t *testing.T) {
	t.Parallel()
	dir := fakeDir{members: map[string]authz.Member{"mod": {Roles: []string{"r-mod"}}, "admin": {ManageGuild: true}, "plain": {}}}
	tests := []struct {
		name  string
		cfg   authz.Config
		actor authz.Actor
		want  bool
	}{
		{"configured user", authz.Config{OperatorUsers: []string{"u1"}}, authz.Actor{UserID: "u1", Where: conv("c1")}, true},
		{"configured user in a DM", authz.Config{OperatorUsers: []string{"u1"}}, authz.Actor{UserID: "u1", Where: conv("user:u1")}, true},
		{"configured role", authz.Config{OperatorRoles: []string{"r-mod"}}, authz.Actor{UserID: "mod", Where: conv("c1")}, true},
		{"role does not count in a DM", authz.Config{OperatorRoles: []string{"r-mod"}}, authz.Actor{UserID: "mod", Where: conv("user:mod")}, false},
		{"manage server when none configured", authz.Config{}, authz.Actor{UserID: "admin", Where: conv("c1")}, true},
		{"manage server does not count once operators are configured", authz.Config{OperatorUsers: []string{"u1"}}, authz.Actor{UserID: "admin", Where: conv("c1")}, false},
		{"plain member", authz.Config{}, authz.Actor{UserID: "plain", Where: conv("c1")}, false},
		{"nobody", authz.Config{OperatorUsers: []string{""}}, authz.Actor{Where: conv("c1")}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := authz.New(tc.cfg, dir).Operator(t.Context(), tc.actor, tc.actor.Where); got != tc.want {
				t.Fatalf("Operator = %v, want %v", got, tc.want)
			}
		})
	}
	// A failed lookup is not an operator.
	if authz.New(authz.Config{}, fakeDir{err: errors.New("down")}).Operator(t.Context(), authz.Actor{UserID: "admin", Where: conv("c1")}, conv("c1")) {
		t.Fatal("a failed member lookup made an operator")
	}
}

func TestCanPost(t *testing.T) {
	t.Parallel()
	dir := fakeDir{access: map[string]authz.Access{
		"bob/open":     full,
		"bob/hidden":   {Exists: true, BotView: true, BotSend: true, Name: "#hidden"},
		"bob/readonly": {Exists: true, UserView: true, BotView: true, BotSend: true, Name: "#readonly"},
		"bob/botmute":  {Exists: true, UserView: true, UserSend: true, BotView: true, Name: "#botmute"},
	}}
	a := authz.New(authz.Config{}, dir)
	tests := []struct {
		user, to string
		view     string // "" = CanView allowed, else refusal substring
		post     string
	}{
		{"bob", "open", "", ""},
		{"bob", "hidden", "cannot view #hidden", "cannot view #hidden"},
		{"bob", "readonly", "", "may not send messages in #readonly"},
		{"bob", "botmute", "", "the bot itself may not send"},
		{"bob", "gone", "does not exist", "does not exist"},
		{"bob", "user:bob", "", ""},
		{"bob", "user:carol", "someone else's direct messages", "someone else's direct messages"},
		{"", "open", "no user's authority", "no user's authority"},
	}
	for _, tc := range tests {
		for _, c := range []struct {
			what, want string
			err        error
		}{{"view", tc.view, a.CanView(t.Context(), tc.user, conv(tc.to))}, {"post", tc.post, a.CanPost(t.Context(), tc.user, conv(tc.to))}} {
			switch {
			case c.want == "" && c.err != nil:
				t.Errorf("%s %s %s: refused %v", tc.user, c.what, tc.to, c.err)
			case c.want != "" && (c.err == nil || !authz.IsRefusal(c.err) || !strings.Contains(c.err.Error(), c.want)):
				t.Errorf("%s %s %s = %v, want a refusal containing %q", tc.user, c.what, tc.to, c.err, c.want)
			}
		}
	}
	if err := authz.New(authz.Config{}, fakeDir{err: errors.New("timeout")}).CanPost(t.Context(), "bob", conv("open")); !authz.IsRefusal(err) {
		t.Fatalf("a failed lookup = %v, want a refusal (fail closed)", err)
	}
}

func TestMayFocus(t *testing.T) {
	t.Parallel()
	dir := fakeDir{access: map[string]authz.Access{"bob/open": full, "bob/hidden": {Exists: true}},
		members: map[string]authz.Member{"op": {ManageGuild: true}, "bob": {}}}
	a := authz.New(authz.Config{}, dir)
	bob := authz.Actor{UserID: "bob", Where: conv("thread1")}
	tests := []struct {
		name  string
		actor authz.Actor
		t     authz.FocusTarget
		ok    bool
	}{
		{"own DM", bob, authz.FocusTarget{Key: "agent:main:discord:dm:bob", Kind: "main", Conversation: conv("user:bob")}, true},
		{"another's DM", bob, authz.FocusTarget{Key: "agent:main:discord:dm:carol", Kind: "main", Conversation: conv("user:carol")}, false},
		{"visible channel", bob, authz.FocusTarget{Key: "k", Kind: "main", Conversation: conv("open")}, true},
		{"hidden channel", bob, authz.FocusTarget{Key: "k", Kind: "main", Conversation: conv("hidden")}, false},
		{"own subagent", bob, authz.FocusTarget{Key: "s", Kind: "subagent", SpawnedBy: "bob"}, true},
		{"another's subagent", bob, authz.FocusTarget{Key: "s", Kind: "subagent", SpawnedBy: "carol"}, false},
		{"job run", bob, authz.FocusTarget{Key: "agent:main:cron:j:run:r", Kind: "job-run"}, false},
		{"operator: another's DM is nobody's but carol's", authz.Actor{UserID: "op", Where: conv("thread1")}, authz.FocusTarget{Key: "agent:main:discord:dm:carol", Kind: "main", Conversation: conv("user:carol")}, false},
		{"operator: a hidden channel of their server", authz.Actor{UserID: "op", Where: conv("thread1")}, authz.FocusTarget{Key: "k", Kind: "main", Conversation: conv("hidden")}, true},
	}
	for _, tc := range tests {
		err := a.MayFocus(t.Context(), tc.actor, tc.t)
		if (err == nil) != tc.ok || (err != nil && !authz.IsRefusal(err)) {
			t.Errorf("%s: MayFocus = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestPolicyAdmit(t *testing.T) {
	t.Parallel()
	yes := func() bool { return true }
	no := func() bool { return false }
	tests := []struct {
		name   string
		p      authz.Policy
		s      authz.Subject
		ok     bool
		reason string
	}{
		{"open guild", authz.Policy{DM: authz.DMMembers}, authz.Subject{UserID: "u", ChannelID: "c"}, true, ""},
		{"denied user", authz.Policy{DM: authz.DMMembers, Deny: authz.Lists{Users: []string{"u"}}}, authz.Subject{UserID: "u", ChannelID: "c"}, false, "denied-user"},
		{"denied role", authz.Policy{DM: authz.DMMembers, Deny: authz.Lists{Roles: []string{"r"}}}, authz.Subject{UserID: "u", Roles: []string{"x", "r"}, ChannelID: "c"}, false, "denied-role"},
		{"denied channel via thread parent", authz.Policy{DM: authz.DMMembers, Deny: authz.Lists{Channels: []string{"p"}}}, authz.Subject{UserID: "u", ChannelID: "t", ParentID: "p"}, false, "denied-channel"},
		{"deny beats allow", authz.Policy{DM: authz.DMMembers, Allow: authz.Lists{Users: []string{"u"}}, Deny: authz.Lists{Roles: []string{"r"}}}, authz.Subject{UserID: "u", Roles: []string{"r"}, ChannelID: "c"}, false, "denied-role"},
		{"allowlisted channel", authz.Policy{DM: authz.DMMembers, Allow: authz.Lists{Channels: []string{"c"}}}, authz.Subject{UserID: "u", ChannelID: "c"}, true, ""},
		{"other channel not allowlisted", authz.Policy{DM: authz.DMMembers, Allow: authz.Lists{Channels: []string{"c"}}}, authz.Subject{UserID: "u", ChannelID: "d"}, false, "not-allowlisted"},
		{"allowlisted role", authz.Policy{DM: authz.DMMembers, Allow: authz.Lists{Roles: []string{"r"}}}, authz.Subject{UserID: "u", Roles: []string{"r"}, ChannelID: "d"}, true, ""},
		{"dm off", authz.Policy{DM: authz.DMOff}, authz.Subject{UserID: "u", DM: true, SharesGuild: yes}, false, "dm-off"},
		{"dm allowlist: listed", authz.Policy{DM: authz.DMAllowlist, Allow: authz.Lists{Users: []string{"u"}}}, authz.Subject{UserID: "u", DM: true, SharesGuild: no}, true, ""},
		{"dm allowlist: not listed", authz.Policy{DM: authz.DMAllowlist, Allow: authz.Lists{Users: []string{"v"}}}, authz.Subject{UserID: "u", DM: true, SharesGuild: yes}, false, "dm-not-allowlisted"},
		{"dm members: member", authz.Policy{DM: authz.DMMembers}, authz.Subject{UserID: "u", DM: true, SharesGuild: yes}, true, ""},
		{"dm members: stranger", authz.Policy{DM: authz.DMMembers}, authz.Subject{UserID: "u", DM: true, SharesGuild: no}, false, "dm-not-member"},
		{"dm members: denied", authz.Policy{DM: authz.DMMembers, Deny: authz.Lists{Users: []string{"u"}}}, authz.Subject{UserID: "u", DM: true, SharesGuild: yes}, false, "denied-user"},
		{"dm members: allow.users restricts", authz.Policy{DM: authz.DMMembers, Allow: authz.Lists{Users: []string{"v"}}}, authz.Subject{UserID: "u", DM: true, SharesGuild: yes}, false, "not-allowlisted"},
	}
	for _, tc := range tests {
		ok, reason := tc.p.Admit(tc.s)
		if ok != tc.ok || reason != tc.reason {
			t.Errorf("%s: Admit = %v %q, want %v %q", tc.name, ok, reason, tc.ok, tc.reason)
		}
	}
}

// The budget counts turns per user across conversations in a sliding
// window on the injected clock; the first refused turn notifies, later
// ones do not, until a turn is admitted again.
func TestLimiterOneNoticePerExhaustion(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	l := authz.NewLimiter(authz.Limits{Turns: 2, Per: time.Hour}, clk)
	t0 := clk.Now()
	if d := l.Take("u", "g1"); !d.OK {
		t.Fatal("first turn refused")
	}
	clk.Advance(10 * time.Minute)
	if d := l.Take("u", "g2"); !d.OK { // another guild: same user budget
		t.Fatal("second turn refused")
	}
	d := l.Take("u", "")
	if d.OK || !d.Notify || d.Scope != "user" || !d.Until.Equal(t0.Add(time.Hour)) {
		t.Fatalf("third turn = %+v, want refused with a notice until %v", d, t0.Add(time.Hour))
	}
	for range 3 {
		if d := l.Take("u", "g1"); d.OK || d.Notify {
			t.Fatalf("later turn = %+v, want silent refusal", d)
		}
	}
	if d := l.Take("v", "g1"); !d.OK {
		t.Fatal("another user was limited")
	}
	clk.Set(t0.Add(time.Hour)) // the first turn leaves the window
	if d := l.Take("u", "g1"); !d.OK {
		t.Fatalf("after reset = %+v, want admitted", d)
	}
	if d := l.Take("u", "g1"); d.OK || !d.Notify {
		t.Fatalf("exhausted again = %+v, want a new notice", d)
	}
}

func TestLimiterGuildCap(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	l := authz.NewLimiter(authz.Limits{Turns: 10, GuildTurns: 2, Per: time.Hour}, clk)
	l.Take("a", "g")
	l.Take("b", "g")
	if d := l.Take("c", "g"); d.OK || d.Scope != "guild" || !d.Notify {
		t.Fatalf("third turn in the guild = %+v, want a guild refusal with a notice", d)
	}
	if d := l.Take("c", "g"); d.OK || d.Notify {
		t.Fatalf("again = %+v, want silence", d)
	}
	if d := l.Take("c", ""); !d.OK {
		t.Fatalf("a DM = %+v: the guild cap does not apply to DMs", d)
	}
	if d := authz.NewLimiter(authz.Limits{}, clk).Take("a", "g"); !d.OK {
		t.Fatal("zero limits must not limit")
	}
}

func TestMayStop(t *testing.T) {
	t.Parallel()
	dir := fakeDir{members: map[string]authz.Member{"op": {ManageGuild: true}, "bob": {}}}
	a := authz.New(authz.Config{}, dir)
	bob := authz.Actor{UserID: "bob", Where: conv("c1")}
	op := authz.Actor{UserID: "op", Where: conv("c1")}
	tests := []struct {
		name  string
		actor authz.Actor
		owner string
		ok    bool
	}{
		{"own run", bob, "bob", true},
		{"another's run", bob, "carol", false},
		{"a system run", bob, "", false},
		{"nobody", authz.Actor{Where: conv("c1")}, "", false},
		{"operator: another's run", op, "carol", true},
		{"operator: a system run", op, "", true},
	}
	for _, tc := range tests {
		err := a.MayStop(t.Context(), tc.actor, tc.owner, conv("c1"), "the turn")
		if (err == nil) != tc.ok || (err != nil && !authz.IsRefusal(err)) {
			t.Errorf("%s: MayStop = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestPermits(t *testing.T) {
	t.Parallel()
	dir := fakeDir{members: map[string]authz.Member{"mod": {Roles: []string{"r-mod"}}, "admin": {ManageGuild: true}, "plain": {}}}
	a := authz.New(authz.Config{}, dir)
	tests := []struct {
		name  string
		g     authz.Grant
		actor authz.Actor
		want  bool
	}{
		{"open grant, anyone", authz.Grant{}, authz.Actor{UserID: "plain", Where: conv("c1")}, true},
		{"open grant, nobody", authz.Grant{}, authz.Actor{Where: conv("c1")}, true},
		{"listed user", authz.Grant{Users: []string{"u1"}}, authz.Actor{UserID: "u1", Where: conv("user:u1")}, true},
		{"unlisted user", authz.Grant{Users: []string{"u1"}}, authz.Actor{UserID: "plain", Where: conv("c1")}, false},
		{"listed role", authz.Grant{Roles: []string{"r-mod"}}, authz.Actor{UserID: "mod", Where: conv("c1")}, true},
		{"role does not count in a DM", authz.Grant{Roles: []string{"r-mod"}}, authz.Actor{UserID: "mod", Where: conv("user:mod")}, false},
		{"operators only: Manage Server is no power over the host", authz.Grant{Operators: true}, authz.Actor{UserID: "admin", Where: conv("c1")}, false},
		{"operators only: plain member", authz.Grant{Operators: true}, authz.Actor{UserID: "plain", Where: conv("c1")}, false},
		{"users list does not admit operators", authz.Grant{Users: []string{"u1"}}, authz.Actor{UserID: "admin", Where: conv("c1")}, false},
		{"restricted, nobody", authz.Grant{Users: []string{"u1"}}, authz.Actor{Where: conv("c1")}, false},
	}
	for _, tt := range tests {
		err := a.Permits(context.Background(), tt.actor, tt.g, "the x tools")
		if (err == nil) != tt.want {
			t.Errorf("%s: Permits = %v, want allowed %v", tt.name, err, tt.want)
		}
		if err != nil && !authz.IsRefusal(err) {
			t.Errorf("%s: not a refusal: %v", tt.name, err)
		}
	}
	failing := authz.New(authz.Config{}, fakeDir{err: errors.New("down")})
	if err := failing.Permits(context.Background(), authz.Actor{UserID: "mod", Where: conv("c1")}, authz.Grant{Roles: []string{"r-mod"}}, "x"); err == nil {
		t.Error("a failed role lookup allowed the call")
	}
}
