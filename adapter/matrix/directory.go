package matrix

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// Directory is core/authz.Directory for Matrix conversations, computed from the room's state as the bot reads it
// (nothing cached: every question reads the homeserver, so a kick or a power-level change counts at once):
//   - view: the user's membership in the room is "join" (the bot's too, for the bot's bits);
//   - send: joined and power level >= the level the room's power levels require for m.room.message
//     (events["m.room.message"], else events_default);
//   - Member.ManageGuild (Discord's Manage Server, what makes an operator when none are configured): power level >=
//     the level needed to change the room's power levels (events["m.room.power_levels"], else state_default),
//     i.e. the user can change who may do what in the room. Matrix has no roles: Member.Roles is empty.
//
// A thread is its room (Matrix threads have no permissions of their own) and exists while its root does. A room the
// bot is not joined to (left, kicked, banned: Dendrite still answers a former member the state as of its leaving),
// cannot read (403) or that is unknown (404) does not exist for the authority, and nobody is a member there. Any
// other failure is returned (the authority refuses: fail closed).
type Directory struct {
	c *Client
}

var _ authz.Directory = (*Directory)(nil)

// NewDirectory returns the directory over c. It does no I/O.
func NewDirectory(c *Client) *Directory { return &Directory{c: c} }

// roomOf is the room a conversation ref names (a room, or a thread's parent room) and the thread root ("" for a
// room). ok is false for a DM ref or anything that is not a Matrix room or thread.
func roomOf(conv binding.ConversationRef) (room, root string, ok bool) {
	n := conv.Normalize()
	if n.Channel != Platform {
		return "", "", false
	}
	switch id := n.ConversationID; {
	case strings.HasPrefix(id, "!"):
		return id, "", true
	case strings.HasPrefix(id, "$") && strings.HasPrefix(n.ParentConversationID, "!"):
		return n.ParentConversationID, id, true
	}
	return "", "", false
}

// roomState is what the directory reads of a room.
type roomState struct {
	pl   *event.PowerLevelsEventContent
	name string
}

// state reads the room's power levels and name. gone is true when the bot cannot read the room (403/404).
func (d *Directory) state(ctx context.Context, room string) (st roomState, gone bool, err error) {
	var pl event.PowerLevelsEventContent
	if err := d.c.bot.StateEvent(ctx, id.RoomID(room), event.StatePowerLevels, "", &pl); err != nil {
		err = classify("matrix: power levels of "+room, err)
		if errors.Is(err, ErrDestinationGone) {
			// 403: the bot is not in the room; 404: no such room, or a room without power levels (every room a
			// homeserver creates has them; without them nothing here can be decided, so nothing is allowed).
			return roomState{}, true, nil
		}
		return roomState{}, false, err
	}
	var nm struct {
		Name string `json:"name"`
	}
	if err := d.c.bot.StateEvent(ctx, id.RoomID(room), event.StateRoomName, "", &nm); err == nil {
		st.name = strings.TrimSpace(nm.Name)
	}
	st.pl = &pl
	return st, false, nil
}

// joined reports whether userID's membership in room is "join" (no member event: not joined).
func (d *Directory) joined(ctx context.Context, room, userID string) (bool, error) {
	if _, _, err := id.UserID(userID).ParseAndValidateRelaxed(); err != nil {
		return false, nil // no Matrix user (a Discord id, say): a member of no Matrix room
	}
	var m struct {
		Membership string `json:"membership"`
	}
	if err := d.c.bot.StateEvent(ctx, id.RoomID(room), event.StateMember, userID, &m); err != nil {
		if errors.Is(err, mautrix.MNotFound) {
			return false, nil
		}
		return false, classify("matrix: membership of "+userID+" in "+room, err)
	}
	return m.Membership == string(event.MembershipJoin), nil
}

// Access implements authz.Directory.
func (d *Directory) Access(ctx context.Context, userID string, conv binding.ConversationRef) (authz.Access, error) {
	room, root, ok := roomOf(conv)
	if !ok {
		return authz.Access{}, nil
	}
	st, gone, err := d.state(ctx, room)
	if err != nil || gone {
		return authz.Access{}, err
	}
	if root != "" {
		if err := d.c.checkRoot(ctx, room, root); err != nil {
			if errors.Is(err, ErrDestinationGone) {
				return authz.Access{}, nil
			}
			return authz.Access{}, err
		}
	}
	botIn, err := d.joined(ctx, room, d.c.opt.UserID)
	if err != nil || !botIn {
		// A room the bot left still answers it the state as of its leaving (stale, and no longer its room).
		return authz.Access{}, err
	}
	userIn := userID == d.c.opt.UserID
	if userID != d.c.opt.UserID {
		if userIn, err = d.joined(ctx, room, userID); err != nil {
			return authz.Access{}, err
		}
	}
	send := st.pl.GetEventLevel(event.EventMessage)
	acc := authz.Access{
		Exists:   true,
		UserView: userIn, UserSend: userIn && st.pl.GetUserLevel(id.UserID(userID)) >= send,
		BotView: botIn, BotSend: botIn && st.pl.GetUserLevel(id.UserID(d.c.opt.UserID)) >= send,
	}
	switch {
	case st.name != "" && root != "":
		acc.Name = fmt.Sprintf("a thread in %q", st.name)
	case st.name != "":
		acc.Name = fmt.Sprintf("%q", st.name)
	}
	return acc, nil
}

// Member implements authz.Directory: ok is false for a DM, a user not joined to the conversation's room, or a
// conversation that is no Matrix room or thread.
func (d *Directory) Member(ctx context.Context, userID string, conv binding.ConversationRef) (authz.Member, bool, error) {
	if strings.HasPrefix(conv.Normalize().ConversationID, sessionkey.DMPrefix) {
		return authz.Member{}, false, nil
	}
	room, _, ok := roomOf(conv)
	if !ok {
		return authz.Member{}, false, nil
	}
	botIn, err := d.joined(ctx, room, d.c.opt.UserID)
	in := botIn
	if err == nil && botIn && userID != d.c.opt.UserID {
		in, err = d.joined(ctx, room, userID)
	}
	if err != nil {
		if errors.Is(err, ErrDestinationGone) { // the bot cannot read the room: nobody is a member as far as it knows
			return authz.Member{}, false, nil
		}
		return authz.Member{}, false, err
	}
	if !in {
		return authz.Member{}, false, nil
	}
	st, gone, err := d.state(ctx, room)
	if err != nil || gone {
		return authz.Member{}, false, err
	}
	return authz.Member{ManageGuild: st.pl.GetUserLevel(id.UserID(userID)) >= st.pl.GetEventLevel(event.StatePowerLevels)}, true, nil
}

// RoomOf is the room a conversation belongs to (a thread's parent room),
// "" for a DM or another platform's conversation: usage records and
// per-room budgets.
func RoomOf(conv binding.ConversationRef) string {
	room, _, _ := roomOf(conv)
	return room
}
