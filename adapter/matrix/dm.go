package matrix

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"

	"github.com/agentbot/agentbot/core/sessionkey"
)

// Direct messages. A Matrix DM is a room like any other; what makes it one is the bot's m.direct account data
// (user id -> its DM rooms with that user), the Matrix convention clients keep too. The adapter keeps it: a room the
// bot joins from an invite marked is_direct is added under its inviter. A DM's conversation ref is the user
// ("user:@alice:server", core's DM shape: its session key is ...:matrix:dm:@alice:server); a send to it goes to
// the user's first DM room in m.direct.

// dmState is the bot's m.direct, loaded once and then kept in step with what the bot writes.
type dmState struct {
	loaded bool
	byUser map[string][]string // user -> rooms (m.direct)
	byRoom map[string]string   // room -> user
}

func (s *dmState) set(direct map[string][]string) {
	s.byUser, s.byRoom, s.loaded = direct, map[string]string{}, true
	for u, rooms := range direct {
		for _, r := range rooms {
			s.byRoom[r] = u
		}
	}
}

// loadDMs reads m.direct once (under dmMu). No m.direct yet is an empty one.
func (c *Client) loadDMs(ctx context.Context) error {
	if c.dms.loaded {
		return nil
	}
	direct := map[string][]string{}
	if err := c.bot.GetAccountData(ctx, event.AccountDataDirectChats.Type, &direct); err != nil && !errors.Is(err, mautrix.MNotFound) {
		return classify("matrix: read m.direct", err)
	}
	c.dms.set(direct)
	return nil
}

// DMOf reports whether roomID is a DM room of sender's (in m.direct). It also makes roomID the room sends to
// sender's DM go to from now on (the one they last wrote in), while the process runs.
func (c *Client) DMOf(ctx context.Context, roomID, sender string) (bool, error) {
	c.dmMu.Lock()
	defer c.dmMu.Unlock()
	if err := c.loadDMs(ctx); err != nil {
		return false, err
	}
	if sender == "" || c.dms.byRoom[roomID] != sender {
		return false, nil
	}
	rooms := c.dms.byUser[sender]
	if i := slices.Index(rooms, roomID); i > 0 {
		c.dms.byUser[sender] = append([]string{roomID}, slices.Delete(slices.Clone(rooms), i, i+1)...)
	}
	return true, nil
}

// DMRoom returns the DM room of userID (the one they last wrote in, else the first in m.direct); ErrDestinationGone (wrapped) when the bot has none with them (the bot
// does not open DMs on its own: a person starts one by inviting it).
func (c *Client) DMRoom(ctx context.Context, userID string) (string, error) {
	c.dmMu.Lock()
	defer c.dmMu.Unlock()
	if err := c.loadDMs(ctx); err != nil {
		return "", err
	}
	if rooms := c.dms.byUser[userID]; len(rooms) > 0 {
		return rooms[0], nil
	}
	return "", fmt.Errorf("matrix: direct messages with %s: %w: the bot has no DM room with them", userID, ErrDestinationGone)
}

// noteDM records roomID as a DM room with userID in m.direct (written before the cache: a failed write leaves
// both as they were).
func (c *Client) noteDM(ctx context.Context, roomID, userID string) error {
	c.dmMu.Lock()
	defer c.dmMu.Unlock()
	if err := c.loadDMs(ctx); err != nil {
		return err
	}
	if slices.Contains(c.dms.byUser[userID], roomID) {
		return nil
	}
	direct := make(map[string][]string, len(c.dms.byUser)+1)
	for u, rooms := range c.dms.byUser {
		direct[u] = slices.Clone(rooms)
	}
	direct[userID] = append(direct[userID], roomID)
	if err := c.bot.SetAccountData(ctx, event.AccountDataDirectChats.Type, direct); err != nil {
		return classify("matrix: write m.direct", err)
	}
	c.dms.set(direct)
	return nil
}

// isDMConv reports whether a conversation id is a Matrix DM ("user:@alice:server").
func isDMConv(conv string) bool {
	user, ok := strings.CutPrefix(conv, sessionkey.DMPrefix)
	return ok && strings.HasPrefix(user, "@")
}

// resolveDM sets a DM message's room (the bot's DM room with its user); other messages are returned unchanged.
func (c *Client) resolveDM(ctx context.Context, m Message) (Message, error) {
	if m.dmUser == "" {
		return m, nil
	}
	room, err := c.DMRoom(ctx, m.dmUser)
	if err != nil {
		return Message{}, fmt.Errorf("matrix: send %s: %w", m.DeliveryID, err)
	}
	m.RoomID, m.dmUser = room, ""
	return m, nil
}

// roomFor is the room a conversation posts into: the room, a thread's room (its root returned), or a DM's room.
func (c *Client) roomFor(ctx context.Context, conv, parent string) (room, root string, err error) {
	switch {
	case strings.HasPrefix(conv, "!"):
		return conv, "", nil
	case strings.HasPrefix(conv, "$") && strings.HasPrefix(parent, "!"):
		return parent, conv, nil
	case isDMConv(conv):
		room, err := c.DMRoom(ctx, strings.TrimPrefix(conv, sessionkey.DMPrefix))
		return room, "", err
	}
	return "", "", fmt.Errorf("matrix: conversation %q (parent %q): %w: neither a room, a thread root in a room nor a DM", conv, parent, ErrRejected)
}
