package matrix

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// userClient is a mautrix client of a registered user.
func (e *env) userClient(t *testing.T, localpart string) (string, *mautrix.Client) {
	t.Helper()
	u := e.srv.Register(t, localpart, false)
	cli, err := mautrix.NewClient(e.srv.URL, id.UserID(u.UserID), u.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	cli.Log = zerolog.Nop()
	return u.UserID, cli
}

// joinAs: alice invites the user into the room and they join.
func (e *env) joinAs(t *testing.T, userID string, cli *mautrix.Client) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.ali.InviteUser(ctx, id.RoomID(e.room), &mautrix.ReqInviteUser{UserID: id.UserID(userID)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.JoinRoomByID(ctx, id.RoomID(e.room)); err != nil {
		t.Fatal(err)
	}
}

// powerLevels changes the room's power levels as alice (power 100).
func (e *env) powerLevels(t *testing.T, change func(pl map[string]any)) {
	t.Helper()
	ctx := context.Background()
	var pl map[string]any
	if err := e.ali.StateEvent(ctx, id.RoomID(e.room), event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	change(pl)
	if _, err := e.ali.SendStateEvent(ctx, id.RoomID(e.room), event.StatePowerLevels, "", pl); err != nil {
		t.Fatal(err)
	}
}

// TestDirectoryAgainstDendrite: Access and Member follow the room's membership and power levels as Dendrite holds
// them, a thread is its room while its root stands, and the authority built over the directory decides with them.
func TestDirectoryAgainstDendrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	dir := NewDirectory(c)
	room := binding.ConversationRef{Channel: "matrix", ConversationID: e.room}
	carol, carolCli := e.userClient(t, "carol")
	dave, _ := e.userClient(t, "dave") // never joins

	access := func(user string, conv binding.ConversationRef) authz.Access {
		t.Helper()
		acc, err := dir.Access(ctx, user, conv)
		if err != nil {
			t.Fatalf("access of %s: %v", user, err)
		}
		return acc
	}
	member := func(user string, conv binding.ConversationRef) (authz.Member, bool) {
		t.Helper()
		m, ok, err := dir.Member(ctx, user, conv)
		if err != nil {
			t.Fatalf("member %s: %v", user, err)
		}
		return m, ok
	}
	all := authz.Access{Exists: true, UserView: true, UserSend: true, BotView: true, BotSend: true}

	if got := access(e.alice.UserID, room); got != all {
		t.Errorf("alice (creator, power 100): %+v, want %+v", got, all)
	}
	if m, ok := member(e.alice.UserID, room); !ok || !m.ManageGuild {
		t.Errorf("alice: member %+v ok=%v, want a member who manages the room", m, ok)
	}
	if got := access(dave, room); got.UserView || got.UserSend || !got.BotSend || !got.Exists {
		t.Errorf("dave (not joined): %+v, want no view, no send, the bot's bits set", got)
	}
	if _, ok := member(dave, room); ok {
		t.Error("dave (not joined) is a member")
	}

	// A user id of another platform (a Discord snowflake) is nobody here: an answer, not a failed lookup.
	if got := access("123456789012345678", room); got.UserView || !got.Exists {
		t.Errorf("a Discord user id in a Matrix room: %+v, want an existing room they cannot view", got)
	}

	e.joinAs(t, carol, carolCli)
	if got := access(carol, room); got != all {
		t.Errorf("carol (joined, power 0): %+v, want %+v", got, all)
	}
	if m, ok := member(carol, room); !ok || m.ManageGuild {
		t.Errorf("carol: member %+v ok=%v, want a member who does not manage the room", m, ok)
	}

	// Messages need 50: carol and the bot (0) may view but not send; alice may. Power levels need 50 too: carol at 50
	// manages the room.
	e.powerLevels(t, func(pl map[string]any) {
		pl["events"].(map[string]any)["m.room.message"] = 50
	})
	if got := access(carol, room); !got.UserView || got.UserSend || !got.BotView || got.BotSend {
		t.Errorf("carol in a room locked at 50: %+v, want view only, bot view only", got)
	}
	auth := authz.New(authz.Config{}, dir)
	if err := auth.CanPost(ctx, carol, room); !authz.IsRefusal(err) {
		t.Errorf("CanPost for carol in a locked room: %v, want a refusal", err)
	}
	if err := auth.CanView(ctx, carol, room); err != nil {
		t.Errorf("CanView for carol: %v", err)
	}
	e.powerLevels(t, func(pl map[string]any) {
		pl["users"].(map[string]any)[carol] = 50
		pl["users"].(map[string]any)[e.bot.UserID] = 50
		pl["events"].(map[string]any)["m.room.power_levels"] = 50
	})
	if got := access(carol, room); got != all {
		t.Errorf("carol at 50: %+v, want %+v", got, all)
	}
	if m, ok := member(carol, room); !ok || !m.ManageGuild {
		t.Errorf("carol at 50 with power levels at 50: %+v ok=%v, want manages the room", m, ok)
	}
	if !auth.Operator(ctx, authz.Actor{UserID: carol, Where: room}, room) {
		t.Error("carol, who can change the room's power levels, is no operator there (none configured)")
	}

	// A thread is its room while its root stands; a redacted root does not exist.
	root, err := c.CreateThread(ctx, e.room, "Task", "dir-root", Persona{})
	if err != nil {
		t.Fatal(err)
	}
	thread := binding.ConversationRef{Channel: "matrix", ConversationID: root, ParentConversationID: e.room}
	if got := access(carol, thread); got.Exists != true || !got.UserSend || !got.BotSend {
		t.Errorf("carol in a thread: %+v", got)
	}
	if _, err := e.ali.RedactEvent(ctx, id.RoomID(e.room), id.EventID(root)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for access(carol, thread).Exists {
		if time.Now().After(deadline) {
			t.Fatal("a thread whose root was redacted still exists for the directory")
		}
		<-time.After(20 * time.Millisecond) // Dendrite applies a redaction asynchronously
	}

	// carol leaves: no longer a member, no view.
	if _, err := carolCli.LeaveRoom(ctx, id.RoomID(e.room)); err != nil {
		t.Fatal(err)
	}
	if got := access(carol, room); got.UserView {
		t.Errorf("carol after leaving: %+v, want no view", got)
	}
	if _, ok := member(carol, room); ok {
		t.Error("carol after leaving is a member")
	}

	// A DM is not the directory's (authz decides it); a room the bot left does not exist for it.
	if _, ok := member(e.alice.UserID, binding.ConversationRef{Channel: "matrix", ConversationID: "user:" + e.alice.UserID}); ok {
		t.Error("a DM conversation has members")
	}
	if _, err := c.bot.LeaveRoom(ctx, id.RoomID(e.room)); err != nil {
		t.Fatal(err)
	}
	if got := access(e.alice.UserID, room); got.Exists {
		t.Errorf("a room the bot left: %+v, want it not to exist", got)
	}
	if err := auth.CanView(ctx, e.alice.UserID, room); !authz.IsRefusal(err) {
		t.Errorf("CanView in a room the bot left: %v, want a refusal", err)
	}
}

// TestDirectoryFailsClosed: a homeserver that cannot be reached is an error, never an answer, and the authority
// refuses.
func TestDirectoryFailsClosed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, func(o *Options) { o.HomeserverURL = "http://127.0.0.1:1" })
	c.bot.DefaultHTTPRetries = 0
	dir := NewDirectory(c)
	room := binding.ConversationRef{Channel: "matrix", ConversationID: e.room}
	if acc, err := dir.Access(ctx, e.alice.UserID, room); err == nil || !errors.Is(err, delivery.ErrTransient) {
		t.Fatalf("access with the homeserver down: %+v, %v; want a transient error", acc, err)
	}
	if _, ok, err := dir.Member(ctx, e.alice.UserID, room); err == nil || ok {
		t.Fatalf("member with the homeserver down: ok=%v, %v; want an error", ok, err)
	}
	auth := authz.New(authz.Config{}, dir)
	if err := auth.CanPost(ctx, e.alice.UserID, room); !authz.IsRefusal(err) {
		t.Fatalf("CanPost with the homeserver down: %v, want a refusal", err)
	}
	if auth.Operator(ctx, authz.Actor{UserID: e.alice.UserID, Where: room}, room) {
		t.Fatal("an operator while the homeserver is down")
	}
}
