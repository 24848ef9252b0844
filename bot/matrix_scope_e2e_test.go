package bot

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
// Then the scoped operator (issue 26.1): alice, room A's owner, adds a job there; mallory, owner of room B only,
// neither sees it in `!cron list`, nor removes or runs it, nor focuses room A's session from B; the job is still
// alice's afterwards.
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

	// Scoped power: room A's job and session are out of reach of room B's owner.
	w.say(t, w.room, "", "bot: hello from A", true)
	waitFor(t, "the answer in room A", func() bool { return len(w.botReplies(t, w.room, w.room)) > 0 })
	job := jobID(t, w.command(t, w.room, `!cron add secret digest of A schedule="every 1h" target=isolated`, "added (background)"))
	malCommand := func(text string) string {
		t.Helper()
		content := map[string]any{"msgtype": "m.text", "body": text}
		var sent struct {
			EventID string `json:"event_id"`
		}
		w.do(t, mallory.AccessToken, "PUT", fmt.Sprintf("/rooms/%s/send/m.room.message/m%d", url.PathEscape(roomB), w.txn.Add(1)), content, &sent)
		var reply string
		waitFor(t, "the reply to "+text, func() bool {
			after := false
			for _, m := range w.display(t, roomB).Messages(roomB) {
				if m.ID == sent.EventID {
					after = true
				} else if after && m.FromBot {
					reply = m.Content
					return true
				}
			}
			return false
		})
		return reply
	}
	if got := malCommand("!cron list"); strings.Contains(got, job) || strings.Contains(got, "secret digest") {
		t.Errorf("mallory's !cron list in room B shows room A's job: %q", got)
	}
	for _, cmd := range []string{"!cron remove " + job, "!cron run " + job, "!cron runs " + job, "!focus agent:main:matrix:channel:" + w.room} {
		if got := malCommand(cmd); strings.HasPrefix(got, "✅") || strings.Contains(got, "ran: ") || strings.Contains(got, "removed") {
			t.Errorf("mallory's %s in room B was done: %q", cmd, got)
		}
	}
	w.command(t, w.room, "!cron list", job) // still alice's: her list shows it
	// !help lists what the commands' options take here (issue 32): in room A
	// alice is offered her job; in room B mallory is offered nothing of A.
	w.command(t, w.room, "!help", "!cron remove|run id — id: `"+job+"`")
	if got := malCommand("!help"); !strings.Contains(got, "!focus target") || strings.Contains(got, job) || strings.Contains(got, w.room) {
		t.Errorf("mallory's !help in room B: %q", got)
	}
	finishMatrixBot(t, h, w, []string{w.room, roomB})
}
