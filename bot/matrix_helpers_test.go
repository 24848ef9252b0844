package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/dendritetest"
	"github.com/agentbot/agentbot/internal/rule1"
)

// mxWorld is a real Dendrite for the bot: its appservice registered, the
// bot account and alice (a person) registered, and a private room alice
// made and the bot joined. The test speaks the client-server API over
// plain HTTP (only adapter/matrix imports a Matrix library).
type mxWorld struct {
	srv   *dendritetest.Server
	as    *dendritetest.AppService
	bot   dendritetest.User
	alice dendritetest.User
	room  string
	txn   atomic.Int64
}

func newMxWorld(t *testing.T) *mxWorld {
	t.Helper()
	as := &dendritetest.AppService{ID: "agentbot", ASToken: "as-token-" + strings.ReplaceAll(t.Name(), "/", "-"), HSToken: "hs-secret",
		SenderLocalpart: "agentbot-as", UserPrefix: "agentbot_"}
	w := &mxWorld{srv: dendritetest.Start(t, dendritetest.Options{AppService: as}), as: as}
	w.bot = w.srv.Register(t, "bot", false)
	w.alice = w.srv.Register(t, "alice", false)
	w.room = w.newRoom(t)
	return w
}

// configure points the bot's matrix section at the world.
func (w *mxWorld) configure(c *config.Config) {
	c.Matrix.Homeserver, c.Matrix.UserID, c.Matrix.AccessToken = w.srv.URL, w.bot.UserID, w.bot.AccessToken
	c.Matrix.AppService = config.MatrixAppServiceConfig{ASToken: w.as.ASToken, UserPrefix: w.as.UserPrefix, SenderLocalpart: w.as.SenderLocalpart}
	c.Matrix.SyncTimeout = 2 * time.Second
}

// newRoom: alice creates a private room and invites the bot; the bot joins.
func (w *mxWorld) newRoom(t *testing.T) string {
	t.Helper()
	var created struct {
		RoomID string `json:"room_id"`
	}
	w.do(t, w.alice.AccessToken, "POST", "/createRoom", map[string]any{"preset": "private_chat", "invite": []string{w.bot.UserID}}, &created)
	w.do(t, w.bot.AccessToken, "POST", "/join/"+url.PathEscape(created.RoomID), map[string]any{}, nil)
	return created.RoomID
}

// say posts text as alice in room (mentioning the bot when mention) and
// returns the event id. thread, if set, is the thread root it goes into.
func (w *mxWorld) say(t *testing.T, room, thread, text string, mention bool) string {
	t.Helper()
	content := map[string]any{"msgtype": "m.text", "body": text, "m.mentions": map[string]any{}}
	if mention {
		content["m.mentions"] = map[string]any{"user_ids": []string{w.bot.UserID}}
	}
	if thread != "" {
		content["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": thread, "is_falling_back": true,
			"m.in_reply_to": map[string]any{"event_id": thread}}
	}
	var sent struct {
		EventID string `json:"event_id"`
	}
	path := fmt.Sprintf("/rooms/%s/send/m.room.message/t%d", url.PathEscape(room), w.txn.Add(1))
	w.do(t, w.alice.AccessToken, "PUT", path, content, &sent)
	return sent.EventID
}

func (w *mxWorld) do(t *testing.T, token, method, path string, body, out any) {
	t.Helper()
	if err := w.request(context.Background(), token, method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

func (w *mxWorld) request(ctx context.Context, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.srv.URL+"/_matrix/client/v3"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// mxEvent is a room event as /messages returns it.
type mxEvent struct {
	EventID  string          `json:"event_id"`
	Sender   string          `json:"sender"`
	Type     string          `json:"type"`
	Content  json.RawMessage `json:"content"`
	Unsigned struct {
		RedactedBecause json.RawMessage `json:"redacted_because"`
	} `json:"unsigned"`
}

type mxContent struct {
	Body      string `json:"body"`
	MsgType   string `json:"msgtype"`
	RelatesTo *struct {
		RelType string `json:"rel_type"`
		EventID string `json:"event_id"`
	} `json:"m.relates_to"`
	NewContent *struct {
		Body string `json:"body"`
	} `json:"m.new_content"`
}

// timeline returns room's events oldest first (what a client shows, before
// edits and redactions are applied), read backwards from the newest with
// /messages and checked against a fresh /sync of the room: Dendrite's
// topological pagination can leave out an event (two events at one depth,
// as concurrent senders make), and a client that has the room from /sync
// displays it all the same. missed names the events only /sync returned;
// they are placed after the event /sync has before them.
func (w *mxWorld) timeline(ctx context.Context, room string) (events []mxEvent, missed []string, err error) {
	synced, err := w.synced(ctx, room) // first: every event it returns was there when /messages is read
	if err != nil {
		return nil, nil, err
	}
	paged, err := w.messages(ctx, room)
	if err != nil {
		return nil, nil, err
	}
	have := map[string]bool{}
	for _, e := range paged {
		have[e.EventID] = true
	}
	after := map[string][]mxEvent{} // anchor event id ("" = the start) -> events only /sync returned
	anchor := ""
	for _, e := range synced {
		if have[e.EventID] {
			anchor = e.EventID
			continue
		}
		after[anchor] = append(after[anchor], e)
		missed = append(missed, e.EventID)
	}
	events = append(events, after[""]...)
	for _, e := range paged {
		events = append(events, e)
		events = append(events, after[e.EventID]...)
	}
	return events, missed, nil
}

// messages reads room's events with /messages, backwards from the newest,
// and returns them oldest first.
func (w *mxWorld) messages(ctx context.Context, room string) ([]mxEvent, error) {
	var back []mxEvent
	from := ""
	for range 50 {
		q := url.Values{"dir": {"b"}, "limit": {"100"}}
		if from != "" {
			q.Set("from", from)
		}
		var page struct {
			Chunk []mxEvent `json:"chunk"`
			End   string    `json:"end"`
		}
		if err := w.request(ctx, w.alice.AccessToken, "GET", "/rooms/"+url.PathEscape(room)+"/messages?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		back = append(back, page.Chunk...)
		if page.End == "" || len(page.Chunk) == 0 {
			break
		}
		from = page.End
	}
	slices.Reverse(back)
	return back, nil
}

// synced is room's timeline in a fresh /sync of alice's (no since token;
// up to its last 1000 events, in the order the homeserver streamed them).
func (w *mxWorld) synced(ctx context.Context, room string) ([]mxEvent, error) {
	filter, err := json.Marshal(map[string]any{"room": map[string]any{"rooms": []string{room},
		"timeline": map[string]any{"limit": 1000}, "state": map[string]any{"lazy_load_members": true, "types": []string{}},
		"ephemeral": map[string]any{"types": []string{}}, "account_data": map[string]any{"types": []string{}}},
		"presence": map[string]any{"types": []string{}}, "account_data": map[string]any{"types": []string{}}})
	if err != nil {
		return nil, err
	}
	var resp struct {
		Rooms struct {
			Join map[string]struct {
				Timeline struct {
					Events []mxEvent `json:"events"`
				} `json:"timeline"`
			} `json:"join"`
		} `json:"rooms"`
	}
	q := url.Values{"timeout": {"0"}, "filter": {string(filter)}}
	if err := w.request(ctx, w.alice.AccessToken, "GET", "/sync?"+q.Encode(), nil, &resp); err != nil {
		return nil, err
	}
	return resp.Rooms.Join[room].Timeline.Events, nil
}

// mxDisplay is the homeserver as the Rule 1 check's rule1.Display: every
// m.room.message of the world's rooms as a person's client shows it (the
// latest m.replace edit's text; redacted events show nothing). A thread's
// messages are displayed in conversation <root> (its own session's key
// names <room>/<root>), the root itself in its room.
type mxDisplay struct {
	w     *mxWorld
	msgs  map[string]rule1.Shown
	convs map[string][]rule1.Shown
}

func (w *mxWorld) display(t *testing.T, rooms ...string) mxDisplay {
	t.Helper()
	d := mxDisplay{w: w, msgs: map[string]rule1.Shown{}, convs: map[string][]rule1.Shown{}}
	var order uint64
	for _, room := range rooms {
		events, missed, err := w.timeline(context.Background(), room)
		if err != nil {
			t.Fatal(err)
		}
		if len(missed) > 0 {
			t.Logf("/messages of %s left out %d event(s) /sync has: %v", room, len(missed), missed)
		}
		edits := map[string]string{}
		inRoom := map[string]bool{}
		for _, e := range events {
			inRoom[e.EventID] = true
		}
		for _, e := range events {
			var c mxContent
			if e.Type != "m.room.message" || json.Unmarshal(e.Content, &c) != nil {
				continue
			}
			if c.RelatesTo != nil && c.RelatesTo.RelType == "m.replace" && c.NewContent != nil && e.Sender != "" {
				edits[c.RelatesTo.EventID] = c.NewContent.Body
			}
		}
		for _, e := range events {
			var c mxContent
			if e.Type != "m.room.message" || len(e.Unsigned.RedactedBecause) > 0 || json.Unmarshal(e.Content, &c) != nil || c.MsgType == "" {
				continue
			}
			if c.RelatesTo != nil && c.RelatesTo.RelType == "m.replace" {
				continue
			}
			conv, own := room, ":channel:"+room
			if c.RelatesTo != nil && c.RelatesTo.RelType == "m.thread" {
				if !inRoom[c.RelatesTo.EventID] {
					continue // a thread of no event of this room: clients show it in no conversation (invariant 18)
				}
				conv, own = c.RelatesTo.EventID, ":channel:"+room+"/"+c.RelatesTo.EventID
			}
			body := c.Body
			if b, ok := edits[e.EventID]; ok {
				body = b
			}
			order++
			m := rule1.Shown{ID: e.EventID, Conversation: conv, OwnKey: own, Content: body, Order: order,
				FromBot: e.Sender == w.bot.UserID || strings.HasPrefix(e.Sender, "@"+w.as.UserPrefix) || strings.HasPrefix(e.Sender, "@"+w.as.SenderLocalpart+":")}
			d.msgs[m.ID] = m
			d.convs[conv] = append(d.convs[conv], m)
		}
	}
	return d
}

func (d mxDisplay) Message(id string) (rule1.Shown, bool) { m, ok := d.msgs[id]; return m, ok }

func (d mxDisplay) Messages(conv string) []rule1.Shown { return d.convs[conv] }

// Addressed: the test's messages to the bot name its user id in m.mentions
// and start with a "bot:" prefix; a message with text after it reaches a session.
func (d mxDisplay) Addressed(content string) bool {
	rest, ok := strings.CutPrefix(content, "bot: ")
	return ok && strings.TrimSpace(rest) != ""
}
