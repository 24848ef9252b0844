package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/delivery"
)

// longText is n bytes or more of mixed text: paragraphs, lines, escapes (<&>"), multibyte characters.
func longText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Paragraph %d: <tag> & \"quoted\" – naïve café 日本語 🎉 with some words to cut between.\n", i)
		if i%7 == 6 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// A send is idempotent by delivery id across a restart of the client and of the homeserver: a resend finds the
// parts already posted (Dendrite forgets transaction ids when it restarts, so only the lookup prevents the
// duplicate), and a resend after a crash mid-send posts only the missing parts.
func TestSendIdempotentAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	txt := longText(130_000)
	start := time.Now()

	rc1, err := e.client(t).Send(ctx, Message{DeliveryID: "d1", RoomID: e.room, Text: txt, Since: start})
	if err != nil {
		t.Fatal(err)
	}
	if len(rc1.EventIDs) != 3 || rc1.Duplicate || rc1.Text != txt {
		t.Fatalf("first send: %d parts, duplicate=%v, text ok=%v; want 3 new parts showing the text", len(rc1.EventIDs), rc1.Duplicate, rc1.Text == txt)
	}
	resend := func(label string) {
		t.Helper()
		e.waitMarked(t, "d1", 3) // a restart takes longer than Dendrite's sync API lags behind a send
		rc, err := e.client(t).Send(ctx, Message{DeliveryID: "d1", RoomID: e.room, Text: txt, Resend: true, Since: start})
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		if !reflect.DeepEqual(rc.EventIDs, rc1.EventIDs) || !rc.Duplicate || rc.Text != txt {
			t.Fatalf("%s: ids %v duplicate=%v, want the first send's %v as a duplicate", label, rc.EventIDs, rc.Duplicate, rc1.EventIDs)
		}
		if got := e.marked(t, "d1"); !reflect.DeepEqual(got, rc1.EventIDs) {
			t.Fatalf("%s: room shows d1 as %v, want %v", label, got, rc1.EventIDs)
		}
	}
	resend("resend after a client restart")

	e.srv.Restart(t)
	resend("resend after a homeserver restart")

	// Without the lookup (a plain retry with the same transaction ids) Dendrite posts the parts again after its
	// restart: the lookup is what prevents the duplicate.
	if _, err := e.client(t).Send(ctx, Message{DeliveryID: "d1", RoomID: e.room, Text: txt}); err != nil {
		t.Fatal(err)
	}
	e.waitMarked(t, "d1", 6)
	if got := e.marked(t, "d1"); len(got) != 6 {
		t.Fatalf("a retry without lookup after a Dendrite restart left %d events, want 6 (Dendrite does not dedupe transaction ids across its restart; if it now does, this control is moot)", len(got))
	}

	// A crash after the first of three parts: the resend posts parts 2 and 3 only.
	c := e.client(t)
	m := Message{DeliveryID: "d2", RoomID: e.room, Text: txt, Since: time.Now()}
	parts := Split(Defuse(txt), c.bodyBudget(m))
	content, err := c.partContent(m, parts[0], 0, len(parts))
	if err != nil {
		t.Fatal(err)
	}
	p0, err := c.bot.SendMessageEvent(ctx, id.RoomID(e.room), event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: txnID("d2", 0)})
	if err != nil {
		t.Fatal(err)
	}
	e.waitMarked(t, "d2", 1) // displayed (Dendrite loses an event its sync API has not taken when it stops)
	e.srv.Restart(t)
	m.Resend = true
	rc, err := e.client(t).Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	e.waitMarked(t, "d2", 3)
	got := e.marked(t, "d2")
	if len(rc.EventIDs) != 3 || rc.EventIDs[0] != p0.EventID.String() || rc.Duplicate || !reflect.DeepEqual(got, rc.EventIDs) || rc.Text != txt {
		t.Fatalf("resend after a partial send: receipt %v (duplicate=%v), room %v (%d); want part 1 %s then two new parts", rc.EventIDs, rc.Duplicate, got, len(got), p0.EventID)
	}
	var shown strings.Builder
	for _, evID := range got {
		shown.WriteString(e.event(t, evID)["content"].(map[string]any)["body"].(string))
	}
	if shown.String() != txt {
		t.Fatal("the room's parts do not add up to the text")
	}
}

// Every send carries m.mentions {} and shows @room defused, so nobody is notified: the same text posted raw by the
// same (power 50) bot notifies alice, the adapter's send does not.
func TestMentionsNeutralised(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// Power 50 for the bot: enough for Dendrite's legacy @room rule.
	var pl map[string]any
	if err := e.ali.StateEvent(ctx, id.RoomID(e.room), event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	pl["users"].(map[string]any)[e.bot.UserID] = 50
	if _, err := e.ali.SendStateEvent(ctx, id.RoomID(e.room), event.StatePowerLevels, "", pl); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	raw, err := c.bot.SendMessageEvent(ctx, id.RoomID(e.room), event.EventMessage, map[string]any{"msgtype": "m.text", "body": "control: @room look", "m.mentions": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	// No user names in it: Dendrite has no intentional-mention push rules, so a display name or user id in a body
	// highlights that user whatever m.mentions says (see DECISIONS); @room is what the adapter can defuse.
	txt := "hey @room, look (and @room again)"
	rc, err := c.Send(ctx, Message{DeliveryID: "n1", RoomID: e.room, Text: txt})
	if err != nil {
		t.Fatal(err)
	}
	ev := e.event(t, rc.EventIDs[0])
	content := ev["content"].(map[string]any)
	if m, ok := content["m.mentions"].(map[string]any); !ok || len(m) != 0 {
		t.Errorf("m.mentions = %#v, want present and empty", content["m.mentions"])
	}
	body := content["body"].(string)
	if strings.Contains(body, "@room") || body != Defuse(txt) || rc.Text != body {
		t.Errorf("body = %q (receipt %q), want %q without @room", body, rc.Text, Defuse(txt))
	}
	// alice's notifications: the control highlights (the @room rule), the adapter's send does not (in a room of
	// two every message notifies by the one-to-one rule; only the highlight is the @room rule's).
	notified := func(evID string) bool {
		var resp struct {
			Notifications []struct {
				Actions []any `json:"actions"`
				Event   struct {
					EventID string `json:"event_id"`
				} `json:"event"`
			} `json:"notifications"`
		}
		u := e.ali.BuildURLWithQuery(mautrix.ClientURLPath{"v3", "notifications"}, nil)
		if _, err := e.ali.MakeRequest(ctx, http.MethodGet, u, nil, &resp); err != nil {
			t.Fatal(err)
		}
		for _, n := range resp.Notifications {
			if n.Event.EventID == evID && highlights(n.Actions) {
				return true
			}
		}
		return false
	}
	// A marker after both (sent by the bot, which alice's push rules see): once alice's highlight for a later
	// raw @room exists, the earlier ones were evaluated.
	last, err := c.bot.SendMessageEvent(ctx, id.RoomID(e.room), event.EventMessage, map[string]any{"msgtype": "m.text", "body": "marker @room", "m.mentions": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for !notified(last.EventID.String()) {
		if time.Now().After(deadline) {
			t.Fatal("the raw @room marker never notified alice: the control does not work")
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // polling the homeserver's notification list until it has the marker
		}
	}
	if !notified(raw.EventID.String()) {
		t.Error("control: a raw @room with empty m.mentions did not notify alice")
	}
	if notified(rc.EventIDs[0]) {
		t.Error("the adapter's send notified alice")
	}
}

// A thread is a root event; a persona posts into it as its appservice ghost (registered, named and joined on
// demand), and a resend under the persona finds the ghost's earlier message.
func TestThreadUnderGhostPersona(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	up, err := c.bot.UploadBytes(ctx, []byte("\x89PNG\r\n\x1a\n"), "image/png")
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.CreateThread(ctx, e.room, "Task: research the bug", "root-1", Persona{})
	if err != nil {
		t.Fatal(err)
	}
	p := Persona{Name: "Researcher", AvatarURL: up.ContentURI.String()}
	m := Message{DeliveryID: "t1", RoomID: e.room, ThreadRoot: root, Text: "found it", Persona: p, Since: time.Now()}
	rc, err := c.Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	ev := e.event(t, rc.EventIDs[0])
	ghostID := "@agentbot_researcher:localhost"
	rel, _ := ev["content"].(map[string]any)["m.relates_to"].(map[string]any)
	if ev["sender"] != ghostID || rel["rel_type"] != "m.thread" || rel["event_id"] != root {
		t.Fatalf("posted %v by %v, want an m.thread reply to %s by %s", rel, ev["sender"], root, ghostID)
	}
	var member struct {
		Displayname string `json:"displayname"`
		AvatarURL   string `json:"avatar_url"`
	}
	if err := e.ali.StateEvent(ctx, id.RoomID(e.room), event.StateMember, ghostID, &member); err != nil {
		t.Fatal(err)
	}
	if member.Displayname != "Researcher" || member.AvatarURL != p.AvatarURL {
		t.Errorf("ghost member = %+v, want Researcher with avatar %s", member, p.AvatarURL)
	}
	var rels struct {
		Chunk []json.RawMessage `json:"chunk"`
	}
	u := e.ali.BuildClientURL("v1", "rooms", e.room, "relations", root, "m.thread")
	deadline := time.Now().Add(waitTimeout)
	for len(rels.Chunk) == 0 && time.Now().Before(deadline) {
		if _, err := e.ali.MakeRequest(ctx, http.MethodGet, u, nil, &rels); err != nil {
			t.Fatal(err)
		}
		if len(rels.Chunk) == 0 {
			<-time.After(20 * time.Millisecond) // Dendrite's sync API serves relations a moment after the send
		}
	}
	if len(rels.Chunk) != 1 || !strings.Contains(string(rels.Chunk[0]), rc.EventIDs[0]) {
		t.Errorf("thread relations = %s, want the ghost's message", rels.Chunk)
	}
	m.Resend = true
	e.waitMarked(t, "t1", 1)
	again, err := e.client(t).Send(ctx, m)
	if err != nil || !again.Duplicate || !reflect.DeepEqual(again.EventIDs, rc.EventIDs) {
		t.Fatalf("resend under the persona: %v, %v; want the ghost's earlier message %v", again, err, rc.EventIDs)
	}
}

// A thread whose root was redacted fails closed with the destination-gone sentinel (also core's), and nothing is
// posted; a room locked by power levels (403) does the same.
func TestRedactedThreadRootAndLockedRoomAreGone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	root, err := c.CreateThread(ctx, e.room, "Task", "root-2", Persona{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, Message{DeliveryID: "g0", RoomID: e.room, ThreadRoot: root, Text: "while alive"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ali.RedactEvent(ctx, id.RoomID(e.room), id.EventID(root)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for len(e.event(t, root)["content"].(map[string]any)) != 0 { // Dendrite applies a redaction asynchronously
		if time.Now().After(deadline) {
			t.Fatal("the root never showed as redacted")
		}
		<-time.After(20 * time.Millisecond)
	}
	for _, p := range []Persona{{}, {Name: "Researcher"}} {
		_, err = c.Send(ctx, Message{DeliveryID: "g1" + p.Name, RoomID: e.room, ThreadRoot: root, Text: "after redaction", Persona: p})
		if !errors.Is(err, ErrDestinationGone) || !errors.Is(err, delivery.ErrDestinationGone) {
			t.Fatalf("send into a redacted thread (persona %q): err = %v, want ErrDestinationGone; root now %v", p.Name, err, e.event(t, root))
		}
		if got := e.marked(t, "g1"+p.Name); len(got) != 0 {
			t.Fatalf("send into a redacted thread posted %v", got)
		}
	}
	// Lock the room: messages need power 100.
	var pl map[string]any
	if err := e.ali.StateEvent(ctx, id.RoomID(e.room), event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	pl["events_default"] = 100
	if _, err := e.ali.SendStateEvent(ctx, id.RoomID(e.room), event.StatePowerLevels, "", pl); err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(ctx, Message{DeliveryID: "g2", RoomID: e.room, Text: "locked"})
	if !errors.Is(err, ErrDestinationGone) || !errors.Is(err, delivery.ErrDestinationGone) {
		t.Fatalf("send into a locked room: err = %v, want ErrDestinationGone", err)
	}
}

// Long text is split below the event size limit at clean cuts, every part is accepted and the parts add up to the
// text; one event over the limit is refused by Dendrite (413), mapped to ErrRejected.
func TestSizeSplitting(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	txt := longText(200_000)
	rc, err := c.Send(ctx, Message{DeliveryID: "s1", RoomID: e.room, ReplyTo: "", Text: txt})
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.EventIDs) < 4 {
		t.Fatalf("%d parts for %d bytes", len(rc.EventIDs), len(txt))
	}
	var shown strings.Builder
	for i, evID := range rc.EventIDs {
		ev := e.event(t, evID)
		b, _ := json.Marshal(ev)
		if len(b) > MaxEventBytes {
			t.Errorf("part %d is %d bytes as JSON", i+1, len(b))
		}
		body := ev["content"].(map[string]any)["body"].(string)
		if i < len(rc.EventIDs)-1 && !strings.HasSuffix(body, "\n") {
			t.Errorf("part %d ends mid-line: %q", i+1, body[max(0, len(body)-20):])
		}
		shown.WriteString(body)
	}
	if shown.String() != txt {
		t.Fatal("parts do not add up to the text")
	}
	// Control: one event with content over the limit.
	big := map[string]any{"msgtype": "m.text", "body": strings.Repeat("x", MaxEventBytes)}
	_, err = c.bot.SendMessageEvent(ctx, id.RoomID(e.room), event.EventMessage, big)
	if err = classify("send", err); !errors.Is(err, ErrRejected) {
		t.Fatalf("oversized event: err = %v, want ErrRejected", err)
	}
}

// highlights reports whether push actions set the highlight tweak (value absent or true).
func highlights(actions []any) bool {
	for _, a := range actions {
		if m, ok := a.(map[string]any); ok && m["set_tweak"] == "highlight" && m["value"] != false {
			return true
		}
	}
	return false
}
