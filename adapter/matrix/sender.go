package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// DeliveryKey is the content field that carries a send's delivery id and part: {"id": ..., "part": i, "parts": n}.
const DeliveryKey = "org.agentbot.delivery"

// Persona is the identity a message is posted under; empty posts as the bot.
type Persona struct {
	Name string
	// AvatarURL must be an mxc:// URI (uploaded to the homeserver's media repository); others are ignored.
	AvatarURL string
}

// Message is one logical send (a core Delivery, in Matrix terms).
type Message struct {
	// DeliveryID identifies the send across attempts and restarts (required).
	DeliveryID string
	RoomID     string
	// ThreadRoot posts into the thread of this root event (every part is in the thread).
	ThreadRoot string
	// ReplyTo makes the first part a reply to this event (in a thread: the reply within the thread).
	ReplyTo string
	Text    string
	Persona Persona
	// Resend: an earlier attempt may have posted some parts (a retry after a crash); they are looked up by
	// DeliveryKey among the room's recent messages, and only the missing parts are posted.
	Resend bool
	// Since bounds the lookup: messages older than this (minus a minute of clock skew) are not scanned.
	Since time.Time

	dmUser string // a DM delivery's user, until resolveDM sets RoomID
}

// Receipt is the homeserver's confirmation: the event ids of the parts, in order.
type Receipt struct {
	EventIDs []string
	// Text is what the parts display (the text with @room defused); with an error, what the posted parts show.
	Text string
	// Duplicate: every part was found posted by an earlier attempt; nothing new was sent.
	Duplicate bool
}

// lookback bounds a Resend's scan of the room's recent messages.
const (
	lookbackEvents = 1000
	lookbackSkew   = time.Minute
)

type deliveryMark struct {
	ID   string `json:"id"`
	Part int    `json:"part"`
	// Parts is how many parts the delivery has; 0 for a live message's part (not known when it is posted).
	Parts int `json:"parts"`
}

// Send posts m, split to fit Matrix's event size limit. Each part's transaction id is derived from the delivery id
// and part, and the content carries DeliveryKey. It fails with ErrDestinationGone (wrapped) when the room does not
// take the bot's messages or the thread root is redacted or gone; nothing is posted to the room instead.
func (c *Client) Send(ctx context.Context, m Message) (Receipt, error) {
	return c.send(ctx, m, nil)
}

// send is Send with the event ids of the first len(shown) parts already known displayed (not posted again).
func (c *Client) send(ctx context.Context, m Message, shown []string) (Receipt, error) {
	if m.DeliveryID == "" || m.RoomID == "" {
		return Receipt{}, fmt.Errorf("matrix: send: %w: delivery id and room are required", ErrRejected)
	}
	parts := Split(Defuse(c.personaPrefix(m.Persona)+m.Text), c.bodyBudget(m))
	if len(parts) == 0 {
		return Receipt{}, fmt.Errorf("matrix: send %s: %w: empty text", m.DeliveryID, ErrRejected)
	}
	// fail returns err with the parts known displayed before this attempt (the caller records exactly those).
	fail := func(err error) (Receipt, error) {
		n := min(len(shown), len(parts))
		if n == 0 {
			return Receipt{}, err
		}
		return Receipt{EventIDs: slices.Clone(shown[:n]), Text: strings.Join(parts[:n], "")}, err
	}
	poster, err := c.poster(ctx, m.RoomID, m.Persona)
	if err != nil {
		return fail(err)
	}
	if m.ThreadRoot != "" {
		if err := c.checkRoot(ctx, m.RoomID, m.ThreadRoot); err != nil {
			return fail(err)
		}
	}
	found := map[int]string{}
	if m.Resend && len(shown) < len(parts) {
		if found, err = c.findParts(ctx, poster, m); err != nil {
			return fail(err)
		}
	}
	for i, evID := range shown {
		found[i] = evID
	}
	rc := Receipt{Duplicate: len(found) == len(parts)}
	var displayed strings.Builder
	for i, part := range parts {
		if evID, ok := found[i]; ok {
			rc.EventIDs = append(rc.EventIDs, evID)
			displayed.WriteString(part)
			continue
		}
		content, err := c.partContent(m, part, i, len(parts))
		if err != nil {
			return rc, err
		}
		resp, err := sendEvent(ctx, poster, id.RoomID(m.RoomID), event.EventMessage, content,
			mautrix.ReqSendEvent{TransactionID: txnID(m.DeliveryID, i)})
		if err != nil {
			rc.Text = displayed.String()
			return rc, classify(fmt.Sprintf("matrix: send %s part %d/%d", m.DeliveryID, i+1, len(parts)), err)
		}
		rc.EventIDs = append(rc.EventIDs, resp.EventID.String())
		c.known.add(m.RoomID, resp.EventID.String(), m.ThreadRoot) // a thread root the bot posts is known to be of its room
		displayed.WriteString(part)
		if i == 0 {
			c.clearTyping(ctx, m.RoomID) // the answer is shown: so the bot no longer types (as on Discord)
		}
	}
	rc.Text = displayed.String()
	return rc, nil
}

// txnID is the transaction id of a part: stable across attempts, so the homeserver dedupes a retry it remembers.
func txnID(deliveryID string, part int) string {
	return "agentbot." + deliveryID + "." + strconv.Itoa(part)
}

// partContent is a part's event content (as the JSON mautrix sends verbatim).
func (c *Client) partContent(m Message, body string, part, parts int) (json.RawMessage, error) {
	content := map[string]any{
		"msgtype":    "m.text",
		"body":       body,
		"m.mentions": map[string]any{},
		DeliveryKey:  deliveryMark{ID: m.DeliveryID, Part: part, Parts: parts},
	}
	reply := ""
	if part == 0 {
		reply = m.ReplyTo
	}
	switch {
	case m.ThreadRoot != "":
		rel := map[string]any{"rel_type": "m.thread", "event_id": m.ThreadRoot}
		if reply != "" {
			rel["m.in_reply_to"] = map[string]any{"event_id": reply}
		} else {
			rel["is_falling_back"] = true
			rel["m.in_reply_to"] = map[string]any{"event_id": m.ThreadRoot}
		}
		content["m.relates_to"] = rel
	case reply != "":
		content["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]any{"event_id": reply}}
	}
	b, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("matrix: send %s: %w: %w", m.DeliveryID, ErrRejected, err)
	}
	if len(b) > MaxContentBytes {
		return nil, fmt.Errorf("matrix: send %s part %d: %w: content is %d bytes (limit %d)", m.DeliveryID, part+1, ErrRejected, len(b), MaxContentBytes)
	}
	return b, nil
}

// bodyBudget is how many JSON bytes a part's body may take: MaxContentBytes minus the rest of the content at its
// largest (part numbers of 6 digits; the first part also carries the reply).
func (c *Client) bodyBudget(m Message) int {
	first, _ := c.partContent(m, "", 0, 999999)
	later, _ := c.partContent(m, "", 999999, 999999)
	return MaxContentBytes - max(len(first)+6, len(later))
}

// findParts scans the room's recent messages (newest first, at most lookbackEvents, none older than m.Since minus
// lookbackSkew) for parts of m posted by poster; it returns their event ids by part index.
func (c *Client) findParts(ctx context.Context, poster *mautrix.Client, m Message) (map[int]string, error) {
	found := map[int]string{}
	from := ""
	var oldest int64
	if !m.Since.IsZero() {
		oldest = m.Since.Add(-lookbackSkew).UnixMilli()
	}
	filter := &mautrix.FilterPart{Types: []event.Type{event.EventMessage}, Senders: []id.UserID{poster.UserID}}
	for seen := 0; seen < lookbackEvents; {
		resp, err := c.bot.Messages(ctx, id.RoomID(m.RoomID), from, "", mautrix.DirectionBackward, filter, 100)
		if err != nil {
			return nil, classify("matrix: send "+m.DeliveryID+": look for an earlier attempt", err)
		}
		for _, ev := range resp.Chunk {
			seen++
			if oldest != 0 && ev.Timestamp < oldest {
				return found, nil
			}
			if ev.Sender != poster.UserID {
				continue
			}
			var mc struct {
				Mark *deliveryMark `json:"org.agentbot.delivery"`
			}
			if json.Unmarshal(ev.Content.VeryRaw, &mc) == nil && mc.Mark != nil && mc.Mark.ID == m.DeliveryID {
				if _, dup := found[mc.Mark.Part]; !dup {
					found[mc.Mark.Part] = ev.ID.String()
				}
			}
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	return found, nil
}

// rootGrace is how long a thread root that the homeserver answers 404 for is asked again before it counts as
// gone: a homeserver serves a just-sent event a moment later (Dendrite's sync API lags its sends), and a thread is
// posted into right after its root was created.
const rootGrace = 3 * time.Second

// checkRoot fails with ErrDestinationGone when the thread root is redacted, or unknown for longer than rootGrace.
func (c *Client) checkRoot(ctx context.Context, roomID, root string) error {
	deadline := time.Now().Add(rootGrace)
	wait := 50 * time.Millisecond
	for {
		ev, err := c.bot.GetEvent(ctx, id.RoomID(roomID), id.EventID(root))
		if err == nil {
			if ev.Unsigned.RedactedBecause != nil || len(ev.Content.VeryRaw) == 0 || string(ev.Content.VeryRaw) == "{}" {
				return fmt.Errorf("matrix: thread root %s in %s is redacted: %w", root, roomID, ErrDestinationGone)
			}
			return nil
		}
		if !errors.Is(err, mautrix.MNotFound) || time.Now().Add(wait).After(deadline) {
			return classify("matrix: thread root "+root, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("matrix: thread root %s: %w", root, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, time.Second)
	}
}

// CreateThread posts a thread root (title, as the bot or persona) in roomID and returns its event id: the thread's
// conversation id. deliveryID makes it idempotent like Send.
func (c *Client) CreateThread(ctx context.Context, roomID, title, deliveryID string, p Persona) (string, error) {
	rc, err := c.Send(ctx, Message{DeliveryID: deliveryID, RoomID: roomID, Text: title, Persona: p, Resend: true})
	if err != nil {
		return "", err
	}
	if len(rc.EventIDs) != 1 {
		return "", fmt.Errorf("matrix: create thread: %w: title needs %d events", ErrRejected, len(rc.EventIDs))
	}
	return rc.EventIDs[0], nil
}

// Edit replaces the text of eventID (posted by the bot, or by persona p's ghost) with text (streaming). The new
// text must fit one event (it appears twice in an edit: the fallback body is shortened to fit). It returns the
// edit event's id.
func (c *Client) Edit(ctx context.Context, roomID, eventID, text, txn string, p Persona) (string, error) {
	return c.edit(ctx, roomID, eventID, text, txn, p, nil)
}

// edit is Edit; file, when set, are the fields of a file message (msgtype m.file, url, filename, info) that the
// new content keeps, text becoming its caption.
func (c *Client) edit(ctx context.Context, roomID, eventID, text, txn string, p Persona, file map[string]any) (string, error) {
	poster, err := c.poster(ctx, roomID, p)
	if err != nil {
		return "", err
	}
	text = Defuse(c.personaPrefix(p) + text)
	newContent := map[string]any{"msgtype": "m.text", "body": text, "m.mentions": map[string]any{}}
	for k, v := range file {
		newContent[k] = v
	}
	content := map[string]any{
		"msgtype":       "m.text",
		"body":          "",
		"m.mentions":    map[string]any{},
		"m.new_content": newContent,
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": eventID},
	}
	b, _ := json.Marshal(content) // everything but the fallback body: what is left is the fallback's room
	room := MaxContentBytes - len(b)
	if room < 0 {
		return "", fmt.Errorf("matrix: edit %s: %w: the edit needs %d bytes (limit %d)", eventID, ErrRejected, len(b), MaxContentBytes)
	}
	fallback := "* " + text
	if JSONLen(fallback) > room {
		// The fallback is for clients without edits: shortened, marked with an ellipsis (3 bytes).
		fallback = ""
		if room > 8+3 {
			fallback = Split("* "+text, room-3)[0] + "…"
		}
	}
	content["body"] = fallback
	raw, err := json.Marshal(content)
	if err != nil {
		return "", fmt.Errorf("matrix: edit %s: %w: %w", eventID, ErrRejected, err)
	}
	if len(raw) > MaxContentBytes {
		return "", fmt.Errorf("matrix: edit %s: %w: content is %d bytes", eventID, ErrRejected, len(raw))
	}
	resp, err := sendEvent(ctx, poster, id.RoomID(roomID), event.EventMessage, json.RawMessage(raw), mautrix.ReqSendEvent{TransactionID: txn})
	if err != nil {
		return "", classify("matrix: edit "+eventID, err)
	}
	return resp.EventID.String(), nil
}

// Typing shows (or, on=false, clears) the bot's typing notice in roomID for at most timeout.
func (c *Client) Typing(ctx context.Context, roomID string, on bool, timeout time.Duration) error {
	_, err := c.bot.UserTyping(ctx, id.RoomID(roomID), on, timeout)
	return classify("matrix: typing in "+roomID, err)
}

// ghost is a persona's appservice user and the rooms it is known to have joined.
type ghost struct {
	cli     *mautrix.Client
	profile Persona // as last set
	rooms   map[string]bool
}

var ghostUnsafe = regexp.MustCompile(`[^a-z0-9._=-]+`)

// GhostLocalpart is the appservice user localpart of a persona name.
func (c *Client) GhostLocalpart(name string) string {
	s := ghostUnsafe.ReplaceAllString(strings.ToLower(strings.TrimSpace(name)), "_")
	return c.opt.AppService.UserPrefix + strings.Trim(s, "_")
}

// personaPrefix is the text a persona's message starts with: "Name: " without an appservice (the documented
// fallback: the bot posts it), else nothing.
func (c *Client) personaPrefix(p Persona) string {
	if p.Name == "" || c.opt.AppService != nil {
		return ""
	}
	return p.Name + ": "
}

// poster returns the client that posts for p in roomID: the persona's ghost (registered, named, joined on demand)
// with an appservice, else the bot.
func (c *Client) poster(ctx context.Context, roomID string, p Persona) (*mautrix.Client, error) {
	if p.Name == "" || c.opt.AppService == nil {
		return c.bot, nil
	}
	c.ghostMu.Lock() // one persona set-up at a time: profile and membership are read and written here only
	defer c.ghostMu.Unlock()
	g, err := c.ghost(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := c.ghostJoin(ctx, g, roomID); err != nil {
		return nil, err
	}
	return g.cli, nil
}

func (c *Client) ghost(ctx context.Context, p Persona) (*ghost, error) {
	as := c.opt.AppService
	local := c.GhostLocalpart(p.Name)
	g := c.ghosts[local]
	if g == nil {
		userID := id.NewUserID(local, as.ServerName)
		cli, err := newMautrix(c.opt.HomeserverURL, c.http, userID, as.ASToken)
		if err != nil {
			return nil, err
		}
		cli.SetAppServiceUserID = true
		_, _, err = cli.Register(ctx, &mautrix.ReqRegister[any]{Username: local, Type: mautrix.AuthTypeAppservice, InhibitLogin: true})
		if err != nil && !errors.Is(err, mautrix.MUserInUse) {
			return nil, classify("matrix: register persona "+userID.String(), err)
		}
		g = &ghost{cli: cli, rooms: map[string]bool{}}
		c.ghosts[local] = g
	}
	if g.profile.Name != p.Name {
		if err := g.cli.SetDisplayName(ctx, p.Name); err != nil {
			return nil, classify("matrix: persona "+local+": display name", err)
		}
		g.profile.Name = p.Name
	}
	if g.profile.AvatarURL != p.AvatarURL && strings.HasPrefix(p.AvatarURL, "mxc://") {
		uri, err := id.ParseContentURI(p.AvatarURL)
		if err == nil {
			err = g.cli.SetAvatarURL(ctx, uri)
		}
		if err != nil {
			return nil, classify("matrix: persona "+local+": avatar", err)
		}
		g.profile.AvatarURL = p.AvatarURL
	}
	return g, nil
}

// ghostJoin makes the ghost a member of roomID: the bot invites it (an "already joined" refusal is fine) and it
// joins. A refusal of the bot's invite (403: the bot may not invite here) is ErrDestinationGone for this persona.
func (c *Client) ghostJoin(ctx context.Context, g *ghost, roomID string) error {
	if g.rooms[roomID] {
		return nil
	}
	if _, err := g.cli.JoinRoomByID(ctx, id.RoomID(roomID)); err != nil {
		if _, ierr := c.bot.InviteUser(ctx, id.RoomID(roomID), &mautrix.ReqInviteUser{UserID: g.cli.UserID}); ierr != nil {
			return classify("matrix: invite persona "+g.cli.UserID.String()+" to "+roomID, ierr)
		}
		if _, err := g.cli.JoinRoomByID(ctx, id.RoomID(roomID)); err != nil {
			return classify("matrix: persona "+g.cli.UserID.String()+" joins "+roomID, err)
		}
	}
	g.rooms[roomID] = true
	return nil
}

// postPart posts m.Text as part `part` of delivery m.DeliveryID (one event; a live message's part) and returns its
// event id. With m.Resend, a part an earlier attempt posted is found (as Send finds its parts) and not posted
// again.
func (c *Client) postPart(ctx context.Context, m Message, part int) (string, error) {
	if m.DeliveryID == "" || m.RoomID == "" {
		return "", fmt.Errorf("matrix: post: %w: delivery id and room are required", ErrRejected)
	}
	poster, err := c.poster(ctx, m.RoomID, m.Persona)
	if err != nil {
		return "", err
	}
	if m.ThreadRoot != "" {
		if err := c.checkRoot(ctx, m.RoomID, m.ThreadRoot); err != nil {
			return "", err
		}
	}
	if m.Resend {
		found, err := c.findParts(ctx, poster, m)
		if err != nil {
			return "", err
		}
		if evID, ok := found[part]; ok {
			return evID, nil
		}
	}
	content, err := c.partContent(m, Defuse(c.personaPrefix(m.Persona)+m.Text), part, 0)
	if err != nil {
		return "", err
	}
	resp, err := sendEvent(ctx, poster, id.RoomID(m.RoomID), event.EventMessage, content,
		mautrix.ReqSendEvent{TransactionID: txnID(m.DeliveryID, part)})
	if err != nil {
		return "", classify(fmt.Sprintf("matrix: post %s part %d", m.DeliveryID, part+1), err)
	}
	c.known.add(m.RoomID, resp.EventID.String(), m.ThreadRoot) // its thread, for a redaction that strips it
	c.clearTyping(ctx, m.RoomID)
	return resp.EventID.String(), nil
}
