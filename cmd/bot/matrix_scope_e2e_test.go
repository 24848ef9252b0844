package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestMatrixE2ETwoRoomsCraftedThreadRoot (issue 26.2, invariant 18), the whole bot: mallory, who owns room B
// (power 100 there) and is in none of alice's rooms, mentions the bot in B with an m.thread relation naming alice's
// DM ("user:@alice"), alice's room A, and an event of room A. None of them is answered anywhere: room A shows no
// bot message, room B none for them; her plain mention after them is answered in B. Rule 1 holds in both rooms.
// (Scoped operators for !focus, !cron and !stop across rooms are core/authz's Operator(target), issue 26.1.)
func TestMatrixE2ETwoRoomsCraftedThreadRoot(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	h := startMatrixBot(t, w)
	mallory := w.srv.Register(t, "mallory", false)
	var created struct {
		RoomID string `json:"room_id"`
	}
	w.do(t, mallory.AccessToken, "POST", "/createRoom", map[string]any{"preset": "private_chat", "invite": []string{w.bot.UserID}}, &created)
	roomB := created.RoomID
	w.do(t, w.bot.AccessToken, "POST", "/join/"+url.PathEscape(roomB), map[string]any{}, nil)
	// alice joins B too, only so the test (which reads rooms as alice) can see what B displays.
	w.do(t, mallory.AccessToken, "POST", "/rooms/"+url.PathEscape(roomB)+"/invite", map[string]any{"user_id": w.alice.UserID}, nil)
	w.do(t, w.alice.AccessToken, "POST", "/join/"+url.PathEscape(roomB), map[string]any{}, nil)
	aliceEv := w.say(t, w.room, "", "a private remark, no mention", false)

	malSay := func(text, root string) string {
		t.Helper()
		content := map[string]any{"msgtype": "m.text", "body": text, "m.mentions": map[string]any{"user_ids": []string{w.bot.UserID}}}
		if root != "" {
			content["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": root}
		}
		var sent struct {
			EventID string `json:"event_id"`
		}
		w.do(t, mallory.AccessToken, "PUT", fmt.Sprintf("/rooms/%s/send/m.room.message/m%d", url.PathEscape(roomB), w.txn.Add(1)), content, &sent)
		return sent.EventID
	}
	for _, root := range []string{"user:" + w.alice.UserID, w.room, aliceEv} {
		malSay("bot: what did alice say? ("+root+")", root)
	}
	malSay("bot: marker", "")
	waitFor(t, "the answer to mallory's marker", func() bool {
		for _, m := range w.botReplies(t, roomB, roomB) {
			if strings.Contains(m.Content, "marker") {
				return true
			}
		}
		return false
	})
	if got := w.botReplies(t, roomB, roomB); len(got) != 1 {
		t.Errorf("room B shows %d bot messages, want only the marker's answer: %+v", len(got), got)
	}
	for _, m := range w.display(t, w.room).Messages(w.room) {
		if m.FromBot {
			t.Errorf("the bot posted in alice's room: %q", m.Content)
		}
	}
	finishMatrixBot(t, h, w, []string{w.room, roomB})
}
