package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// gwConn is one websocket connection. Frames are written by a single writer goroutine
// draining an unbounded queue, so dispatching under e.mu never blocks on the network.
type gwConn struct {
	ws     *websocket.Conn
	mu     sync.Mutex
	queue  [][]byte
	signal chan struct{}
	done   chan struct{}
	once   sync.Once

	session *gwSession // guarded by Emulator.mu
}

func newGwConn(ws *websocket.Conn) *gwConn {
	c := &gwConn{ws: ws, signal: make(chan struct{}, 1), done: make(chan struct{})}
	go c.writer()
	return c
}

func (c *gwConn) enqueue(b []byte) {
	c.mu.Lock()
	c.queue = append(c.queue, b)
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

func (c *gwConn) writer() {
	for {
		select {
		case <-c.done:
			return
		case <-c.signal:
		}
		c.mu.Lock()
		q := c.queue
		c.queue = nil
		c.mu.Unlock()
		for _, b := range q {
			if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				c.drop()
				return
			}
		}
	}
}

// drop closes the TCP connection without a close frame.
func (c *gwConn) drop() {
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.NetConn().Close()
	})
}

// closeWith sends a close frame with code, then drops the connection.
func (c *gwConn) closeWith(code int, text string) {
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	c.drop()
}

type gwFrame struct {
	seq  int64
	data []byte
}

// gwSession is a gateway session: it survives dropped connections and replays on RESUME.
type gwSession struct {
	id         string
	seq        int64
	log        []gwFrame
	conn       *gwConn
	intents    int64
	heartbeats int
	shardID    int // from IDENTIFY's shard [id, count]; 0 of 1 when absent
	shardCount int
}

// wants reports whether the session's shard receives the events of guildID ("" = not a guild
// event, e.g. a DM: shard 0, as Discord does).
func (s *gwSession) wants(guildID string) bool {
	if s.shardCount <= 1 {
		return true
	}
	if guildID == "" {
		return s.shardID == 0
	}
	return GuildShard(guildID, s.shardCount) == s.shardID
}

// GuildShard is the shard that receives a guild's events: (guild_id >> 22) % count.
func GuildShard(guildID string, count int) int {
	id, err := strconv.ParseUint(guildID, 10, 64)
	if err != nil || count <= 1 {
		return 0
	}
	return int((id >> 22) % uint64(count))
}

// eventGuild returns the guild an event belongs to: "id" for GUILD_* events about the guild
// itself, "guild_id" otherwise; "" when it has none.
func eventGuild(t string, data []byte) string {
	var g struct {
		ID      string `json:"id"`
		GuildID string `json:"guild_id"`
	}
	_ = json.Unmarshal(data, &g)
	switch t {
	case "GUILD_CREATE", "GUILD_UPDATE", "GUILD_DELETE":
		return g.ID
	}
	return g.GuildID
}

// maxReplayFrames bounds each session's replay buffer; a RESUME older than the buffer is refused
// with INVALID_SESSION, as Discord does for sessions it can no longer resume.
const maxReplayFrames = 5000

func (s *gwSession) sendLocked(t string, data []byte) {
	s.seq++
	f := fmt.Appendf(nil, `{"op":0,"s":%d,"t":%q,"d":%s}`, s.seq, t, data)
	if len(s.log) >= maxReplayFrames {
		s.log = append(s.log[:0:0], s.log[len(s.log)-maxReplayFrames/2:]...)
	}
	s.log = append(s.log, gwFrame{seq: s.seq, data: f})
	if s.conn != nil {
		s.conn.enqueue(f)
	}
}

// GatewayStats summarises gateway activity.
type GatewayStats struct {
	Connections int // open websocket connections
	Sessions    int // live sessions (resumable)
	Identifies  int
	Resumes     int // successful resumes
	Heartbeats  int // op 1 frames received
	Events      int // dispatches emitted (counted once per event, not per session)
	// AuthFailures counts IDENTIFY and RESUME refused for their token (close 4004).
	AuthFailures int
}

type gwCounters struct{ identifies, resumes, heartbeats, events, sessionSeq, authFailures int }

// dispatchLocked emits a dispatch event to every session whose shard owns the event's guild.
// Caller holds e.mu.
func (e *Emulator) dispatchLocked(t string, d any) {
	data, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("discordtest: marshal %s: %v", t, err))
	}
	guild := eventGuild(t, data)
	memberEvent := strings.HasPrefix(t, "GUILD_MEMBER_")
	for _, s := range e.sessions {
		// As Discord: member events only with the privileged GUILD_MEMBERS intent.
		if s.wants(guild) && (!memberEvent || s.intents&intentGuildMembers != 0) {
			s.sendLocked(t, data)
		}
	}
	e.gw.events++
	e.broadcastLocked()
}

// Privileged intent bits.
const (
	intentGuildMembers   = 1 << 1
	intentMessageContent = 1 << 15
)

// dispatchMessageLocked emits MESSAGE_CREATE/MESSAGE_UPDATE. Sessions that did not identify with
// the MESSAGE_CONTENT intent get content and embeds blanked, as Discord does, except for DMs, the
// bot's own messages and messages mentioning the bot. Caller holds e.mu.
func (e *Emulator) dispatchMessageLocked(t string, m *Message) {
	wire := func() map[string]any {
		w := m.wire()
		if m.GuildID != "" && m.WebhookID == "" && e.world.isMember(m.GuildID, m.Author.ID) {
			w["member"] = e.memberWireLocked(m.GuildID, m.Author.ID, false) // as Discord: a partial member
		}
		return w
	}
	full := mustJSON(wire())
	redacted := full
	if m.GuildID != "" && m.Author.ID != e.botUser.ID && !strings.Contains(m.Content, "<@"+e.botUser.ID+">") &&
		!strings.Contains(m.Content, "<@!"+e.botUser.ID+">") {
		w := wire()
		w["content"], w["embeds"] = "", []any{}
		redacted = mustJSON(w)
	}
	for _, s := range e.sessions {
		if !s.wants(m.GuildID) {
			continue
		}
		if s.intents&intentMessageContent != 0 {
			s.sendLocked(t, full)
		} else {
			s.sendLocked(t, redacted)
		}
	}
	e.gw.events++
	e.broadcastLocked()
}

// Dispatch sends an arbitrary dispatch event (op 0, type t, payload d) to every session (of the
// shard owning the payload's guild_id, or id for GUILD_* events).
func (e *Emulator) Dispatch(t string, d any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dispatchLocked(t, d)
}

func (e *Emulator) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := e.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := newGwConn(ws)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		c.drop()
		return
	}
	e.conns[c] = struct{}{}
	e.broadcastLocked()
	e.mu.Unlock()
	c.enqueue(fmt.Appendf(nil, `{"op":10,"d":{"heartbeat_interval":%d}}`, e.opts.HeartbeatInterval.Milliseconds()))
	defer func() {
		e.mu.Lock()
		if c.session != nil && c.session.conn == c {
			c.session.conn = nil
		}
		delete(e.conns, c)
		e.broadcastLocked()
		e.mu.Unlock()
		c.drop()
	}()
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var p struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if json.Unmarshal(msg, &p) != nil {
			c.closeWith(4002, "Error while decoding payload.")
			return
		}
		switch p.Op {
		case 1:
			e.mu.Lock()
			e.gw.heartbeats++
			if c.session != nil {
				c.session.heartbeats++
			}
			ack := !e.noAck
			e.broadcastLocked()
			e.mu.Unlock()
			if ack {
				c.enqueue([]byte(`{"op":11}`))
			}
		case 2:
			if !e.identify(c, p.D) {
				return
			}
		case 6:
			if !e.resume(c, p.D) {
				return
			}
		}
	}
}

// tokenOK reports whether tok (with or without "Bot ") is a token the
// emulator accepts now.
func (e *Emulator) tokenOK(tok string) bool {
	e.tokMu.RLock()
	defer e.tokMu.RUnlock()
	for _, v := range e.tokens {
		if tok == "Bot "+v || tok == v {
			return true
		}
	}
	return false
}

// refuseAuth closes a connection whose IDENTIFY or RESUME carried a token
// the emulator does not accept, and counts it.
func (e *Emulator) refuseAuth(c *gwConn) {
	e.mu.Lock()
	e.gw.authFailures++
	e.broadcastLocked()
	e.mu.Unlock()
	c.closeWith(4004, "Authentication failed.")
}

func (e *Emulator) identify(c *gwConn, raw json.RawMessage) bool {
	var d struct {
		Token   string `json:"token"`
		Intents int64  `json:"intents"`
		Shard   []int  `json:"shard"`
	}
	_ = json.Unmarshal(raw, &d)
	if !e.tokenOK(d.Token) {
		e.refuseAuth(c)
		return false
	}
	shardID, shardCount := 0, 1
	if len(d.Shard) == 2 {
		shardID, shardCount = d.Shard[0], d.Shard[1]
	}
	if len(d.Shard) != 0 && len(d.Shard) != 2 || shardCount < 1 || shardID < 0 || shardID >= shardCount {
		c.closeWith(4010, "Invalid shard.")
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.disallowedIntentsLocked(d.Intents) {
		c.closeWith(4014, "Disallowed intent(s).")
		return false
	}
	if e.startLim.Remaining > 0 {
		e.startLim.Remaining--
	}
	if c.session != nil && c.session.conn == c {
		c.session.conn = nil
	}
	e.gw.sessionSeq++
	e.gw.identifies++
	s := &gwSession{id: fmt.Sprintf("session-%d", e.gw.sessionSeq), conn: c, intents: d.Intents, shardID: shardID, shardCount: shardCount}
	c.session = s
	e.sessions[s.id] = s
	guilds := []any{}
	var mine []string
	for _, id := range e.world.guildOrder {
		if s.wants(id) {
			mine = append(mine, id)
			guilds = append(guilds, map[string]any{"id": id, "unavailable": true})
		}
	}
	ready := map[string]any{
		"v": 9, "user": e.botUser.wire(), "session_id": s.id, "resume_gateway_url": e.GatewayURL(),
		"guilds": guilds, "private_channels": []any{}, "relationships": []any{},
		"application": map[string]any{"id": e.appID, "flags": e.appFlags},
	}
	if len(d.Shard) == 2 {
		ready["shard"] = []int{shardID, shardCount}
	}
	s.sendLocked("READY", mustJSON(ready))
	// One pass over the channels for every guild (a shard's 2,500 guilds of
	// 40 channels each took minutes guild by guild, all under e.mu).
	byGuild := e.channelsByGuildLocked()
	for _, id := range mine {
		s.sendLocked("GUILD_CREATE", mustJSON(e.guildCreateFromLocked(id, byGuild[id])))
	}
	e.broadcastLocked()
	return true
}

func (e *Emulator) resume(c *gwConn, raw json.RawMessage) bool {
	var d struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	_ = json.Unmarshal(raw, &d)
	if !e.tokenOK(d.Token) {
		e.refuseAuth(c)
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sessions[d.SessionID]
	if s == nil || d.Seq > s.seq || len(s.log) > 0 && d.Seq < s.log[0].seq-1 {
		c.enqueue([]byte(`{"op":9,"d":false}`))
		return true
	}
	if old := s.conn; old != nil && old != c {
		old.session = nil
		go old.drop()
	}
	s.conn = c
	c.session = s
	for _, f := range s.log {
		if f.seq > d.Seq {
			c.enqueue(f.data)
		}
	}
	c.enqueue(fmt.Appendf(nil, `{"op":0,"s":%d,"t":"RESUMED","d":{}}`, s.seq))
	e.gw.resumes++
	e.broadcastLocked()
	return true
}

func (e *Emulator) guildCreateLocked(guildID string) map[string]any {
	return e.guildCreateFromLocked(guildID, e.channelsByGuildLocked()[guildID])
}

// channelsByGuildLocked lists each guild's live channels in creation order.
func (e *Emulator) channelsByGuildLocked() map[string][]*Channel {
	w := &e.world
	out := map[string][]*Channel{}
	for _, id := range w.channelOrder {
		if c := w.channels[id]; !c.Deleted && c.GuildID != "" {
			out[c.GuildID] = append(out[c.GuildID], c)
		}
	}
	return out
}

// guildCreateFromLocked is guildCreateLocked given the guild's channels.
func (e *Emulator) guildCreateFromLocked(guildID string, chans []*Channel) map[string]any {
	w := &e.world
	g := w.guilds[guildID]
	now := e.opts.Now().UTC().Format(tsLayout)
	members := []any{}
	for _, uid := range w.members[guildID] {
		members = append(members, e.memberWireLocked(guildID, uid, true))
	}
	channels, threads := []any{}, []any{}
	for _, c := range chans {
		switch {
		case c.IsThread():
			if !c.Archived {
				threads = append(threads, c.wire(w))
			}
		default:
			channels = append(channels, c.wire(w))
		}
	}
	return map[string]any{
		"id": g.ID, "name": g.Name, "icon": nil, "owner_id": g.OwnerID, "unavailable": false,
		"member_count": len(members), "large": false, "joined_at": now,
		"roles":  w.rolesWire(guildID),
		"emojis": []any{}, "stickers": []any{}, "features": []any{}, "members": members,
		"channels": channels, "threads": threads, "presences": []any{}, "voice_states": []any{},
		"stage_instances": []any{}, "guild_scheduled_events": []any{},
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("discordtest: marshal: %v", err))
	}
	return b
}

// ---- gateway fault injection and inspection ----

// GatewayReconnect sends op 7 RECONNECT on every open connection.
func (e *Emulator) GatewayReconnect() { e.sendAllConns([]byte(`{"op":7,"d":null}`)) }

// GatewayInvalidateSessions sends op 9 INVALID_SESSION with d=resumable on every open connection.
// When not resumable the sessions are forgotten, so a later RESUME is refused.
func (e *Emulator) GatewayInvalidateSessions(resumable bool) {
	e.mu.Lock()
	if !resumable {
		for id, s := range e.sessions {
			if s.conn != nil {
				s.conn.session = nil
			}
			delete(e.sessions, id)
		}
	}
	e.mu.Unlock()
	e.sendAllConns(fmt.Appendf(nil, `{"op":9,"d":%t}`, resumable))
}

// GatewayDrop closes every gateway TCP connection without a close frame. Sessions stay resumable;
// events emitted meanwhile are buffered and replayed on RESUME.
func (e *Emulator) GatewayDrop() {
	e.mu.Lock()
	conns := make([]*gwConn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
		if c.session != nil && c.session.conn == c {
			c.session.conn = nil
		}
	}
	e.broadcastLocked()
	e.mu.Unlock()
	for _, c := range conns {
		c.drop()
	}
}

// GatewayCloseWith sends a close frame with code on every connection (e.g. 4000 to force a resume).
func (e *Emulator) GatewayCloseWith(code int, reason string) {
	e.mu.Lock()
	conns := make([]*gwConn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	for _, c := range conns {
		c.closeWith(code, reason)
	}
}

// SetHeartbeatAck turns HEARTBEAT_ACK replies on (default) or off (zombie connection).
func (e *Emulator) SetHeartbeatAck(on bool) {
	e.mu.Lock()
	e.noAck = !on
	e.mu.Unlock()
}

func (e *Emulator) sendAllConns(b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c := range e.conns {
		c.enqueue(b)
	}
}

// GatewayStats returns gateway counters.
func (e *Emulator) GatewayStats() GatewayStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return GatewayStats{
		Connections: len(e.conns), Sessions: len(e.sessions), Identifies: e.gw.identifies,
		Resumes: e.gw.resumes, Heartbeats: e.gw.heartbeats, Events: e.gw.events, AuthFailures: e.gw.authFailures,
	}
}

// SessionShards returns the [id, count] shard each live session identified with.
func (e *Emulator) SessionShards() map[string][2]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string][2]int{}
	for id, s := range e.sessions {
		out[id] = [2]int{s.shardID, s.shardCount}
	}
	return out
}

// SessionStartLimit returns the identify budget as GET /gateway/bot reports it now.
func (e *Emulator) SessionStartLimit() SessionStartLimit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.startLim
}

// SetSessionStartLimit replaces the identify budget (e.g. Remaining 0 to test a bot that must not
// identify). Zero fields are kept as given.
func (e *Emulator) SetSessionStartLimit(l SessionStartLimit) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.startLim = l
	e.broadcastLocked()
}

// SessionHeartbeats returns heartbeats received per live session id.
func (e *Emulator) SessionHeartbeats() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for id, s := range e.sessions {
		out[id] = s.heartbeats
	}
	return out
}

// isGatewayPath reports whether the path is the websocket endpoint (discordgo adds a trailing slash).
func isGatewayPath(p string) bool {
	return p == "/gateway" || p == "/gateway/" || strings.HasPrefix(p, "/gateway/?")
}
