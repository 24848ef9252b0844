package discordtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

type fixture struct {
	e      *discordtest.Emulator
	guild  discordtest.Guild
	ch     discordtest.Channel
	thread discordtest.Channel
	alice  discordtest.User
}

func newFixture(t *testing.T, opts discordtest.Options) fixture {
	t.Helper()
	e := discordtest.NewTest(t, opts)
	g := e.AddGuild("lab")
	ch, err := e.AddTextChannel(g.ID, "general")
	must(t, err)
	alice, err := e.AddMember(g.ID, "alice")
	must(t, err)
	th, err := e.AddThread(ch.ID, "seeded", alice.ID)
	must(t, err)
	return fixture{e: e, guild: g, ch: ch, thread: th, alice: alice}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// check reports err from a non-test goroutine (handlers), where t.Fatal is not allowed.
func check(t *testing.T, err error) {
	if err != nil {
		t.Error(err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// restSession is a Session used only for REST (never opened).
func restSession(t *testing.T, e *discordtest.Emulator) *discordgo.Session {
	t.Helper()
	s, err := e.NewSession()
	must(t, err)
	return s
}

// openSession opens a Session (after configure, before Open) and waits for its first heartbeat.
func openSession(t *testing.T, e *discordtest.Emulator, configure func(*discordgo.Session)) *discordgo.Session {
	t.Helper()
	s := restSession(t, e)
	if configure != nil {
		configure(s)
	}
	before := e.GatewayStats().Heartbeats
	must(t, s.Open())
	must(t, e.WaitHeartbeats(ctxT(t), before+1))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func restCode(t *testing.T, err error) (status, code int) {
	t.Helper()
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		t.Fatalf("want *discordgo.RESTError, got %T %v", err, err)
	}
	if re.Message == nil {
		t.Fatalf("RESTError without JSON message: %s", re.ResponseBody)
	}
	return re.Response.StatusCode, re.Message.Code
}

func TestHandshakeReadyGuildCreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	type readyInfo struct {
		user, session, app string
		guilds             int
	}
	ready := make(chan readyInfo, 1)
	guilds := make(chan *discordgo.GuildCreate, 1)
	s := openSession(t, f.e, func(s *discordgo.Session) {
		// Copy inside the handler: State mutates the event's guilds concurrently.
		s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) {
			ri := readyInfo{user: r.User.ID, session: r.SessionID, guilds: len(r.Guilds)}
			if r.Application != nil {
				ri.app = r.Application.ID
			}
			// r.Guilds[i] is not read: State.GuildAdd overwrites those structs from the listen goroutine.
			ready <- ri
		})
		s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) { guilds <- g })
	})
	r := <-ready
	if r.user != f.e.BotUserID() || r.session == "" || r.guilds != 1 || r.app != f.e.ApplicationID() {
		t.Fatalf("ready = %+v", r)
	}
	g := <-guilds
	if g.ID != f.guild.ID || len(g.Channels) != 1 || len(g.Threads) != 1 {
		t.Fatalf("guild create: channels %d threads %d", len(g.Channels), len(g.Threads))
	}
	th, err := s.State.Channel(f.thread.ID)
	must(t, err)
	if th.ParentID != f.ch.ID || th.ThreadMetadata == nil || th.ThreadMetadata.Archived {
		t.Fatalf("state thread = %+v", th)
	}
	if s.State.User.ID != f.e.BotUserID() {
		t.Fatalf("state user %s", s.State.User.ID)
	}
	// Seeding after connect is echoed: a new channel reaches State.
	created := make(chan string, 1)
	s.AddHandler(func(_ *discordgo.Session, c *discordgo.ChannelCreate) { created <- c.ID })
	ch2, err := f.e.AddTextChannel(f.guild.ID, "second")
	must(t, err)
	if id := <-created; id != ch2.ID {
		t.Fatalf("channel create %s", id)
	}
}

func TestWrongTokenIsRejected(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	s, err := discordgo.New("Bot wrong")
	must(t, err)
	s.Client = e.HTTPClient()
	s.ShouldReconnectOnError = false
	err = s.Open()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4004 {
		t.Fatalf("open err = %v", err)
	}
	_, err = s.User("@me")
	if st, _ := restCode(t, err); st != http.StatusUnauthorized {
		t.Fatalf("status %d", st)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	seen := make(chan discordgo.Message, 4)
	s := openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageCreate) {
			seen <- *m.Message
			if m.Author.ID == s.State.User.ID {
				return
			}
			_, err := s.ChannelMessageSendComplex(m.ChannelID, &discordgo.MessageSend{
				Content:         "echo: " + m.Content,
				AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}},
				Reference:       m.Reference(),
			})
			if err != nil {
				t.Errorf("send: %v", err)
			}
		})
	})
	_ = s
	in, err := f.e.UserSay(f.ch.ID, f.alice.ID, "hello")
	must(t, err)
	msgs, err := f.e.WaitMessages(ctxT(t), f.ch.ID, 2)
	must(t, err)
	bot := msgs[1]
	if bot.Content != "echo: hello" || bot.Author.ID != f.e.BotUserID() || bot.MessageReference == nil ||
		bot.MessageReference.MessageID != in.ID || string(bot.AllowedMentions) != `{"parse":[],"replied_user":false}` {
		t.Fatalf("bot message = %+v (allowed %s)", bot, bot.AllowedMentions)
	}
	// The bot's own message is echoed back on the gateway.
	first, second := <-seen, <-seen
	if first.Author.ID != f.alice.ID || second.ID != bot.ID || second.Type != discordgo.MessageTypeReply {
		t.Fatalf("gateway saw %+v / %+v", first, second)
	}
}

func TestThreadAndWebhookFlow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	webhookMsgs := make(chan *discordgo.MessageCreate, 4)
	threadCreates := make(chan *discordgo.ThreadCreate, 4)
	s := openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
			if m.WebhookID != "" {
				webhookMsgs <- m
			}
		})
		s.AddHandler(func(_ *discordgo.Session, c *discordgo.ThreadCreate) { threadCreates <- c })
	})
	th, err := s.ThreadStartComplex(f.ch.ID, &discordgo.ThreadStart{Name: "standalone", AutoArchiveDuration: 10080, Type: discordgo.ChannelTypeGuildPublicThread})
	must(t, err)
	if th.Type != discordgo.ChannelTypeGuildPublicThread || th.ParentID != f.ch.ID {
		t.Fatalf("thread = %+v", th)
	}
	if c := <-threadCreates; c.ID != th.ID || !c.NewlyCreated {
		t.Fatalf("thread create = %+v", c)
	}
	if _, err := s.State.Channel(th.ID); err != nil {
		t.Fatalf("state: %v", err)
	}
	must(t, s.ThreadJoin(th.ID))

	root, err := f.e.UserSay(f.ch.ID, f.alice.ID, "start here")
	must(t, err)
	th2, err := s.MessageThreadStartComplex(f.ch.ID, root.ID, &discordgo.ThreadStart{Name: "from-msg", AutoArchiveDuration: 1440})
	must(t, err)
	if th2.ID != root.ID {
		t.Fatalf("thread from message id %s, want %s", th2.ID, root.ID)
	}
	<-threadCreates
	if _, err := s.MessageThreadStartComplex(f.ch.ID, root.ID, &discordgo.ThreadStart{Name: "again", AutoArchiveDuration: 1440}); err == nil {
		t.Fatal("second thread on one message succeeded")
	} else if _, code := restCode(t, err); code != 160004 {
		t.Fatalf("code %d", code)
	}

	wh, err := s.WebhookCreate(f.ch.ID, "relay", "")
	must(t, err)
	hooks, err := s.ChannelWebhooks(f.ch.ID)
	must(t, err)
	if len(hooks) != 1 || hooks[0].ID != wh.ID || wh.Token == "" {
		t.Fatalf("hooks = %+v", hooks)
	}
	msg, err := s.WebhookThreadExecute(wh.ID, wh.Token, true, th.ID, &discordgo.WebhookParams{
		Content: "relayed", Username: "alice-persona", AvatarURL: "https://x/a.png",
		AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}},
	})
	must(t, err)
	if msg.WebhookID != wh.ID || msg.Author.Username != "alice-persona" || msg.ChannelID != th.ID {
		t.Fatalf("webhook message = %+v", msg)
	}
	if m := <-webhookMsgs; m.ID != msg.ID || m.WebhookID != wh.ID {
		t.Fatalf("gateway webhook message = %+v", m)
	}
	nowait, err := s.WebhookExecute(wh.ID, wh.Token, false, &discordgo.WebhookParams{AllowedMentions: quiet(), Content: "nowait"})
	must(t, err)
	if nowait != nil {
		t.Fatalf("wait=false returned %+v", nowait)
	}
	got := f.e.Messages(th.ID)
	if len(got) != 1 || got[0].AvatarURL != "https://x/a.png" || got[0].Author.Username != "alice-persona" {
		t.Fatalf("thread messages = %+v", got)
	}
	if ths := f.e.Threads(f.ch.ID); len(ths) != 3 {
		t.Fatalf("threads = %d", len(ths))
	}
	active, err := s.GuildThreadsActive(f.guild.ID)
	must(t, err)
	if len(active.Threads) != 3 || len(active.Members) != 2 {
		t.Fatalf("active threads %d members %d", len(active.Threads), len(active.Members))
	}
	archived := true
	upd, err := s.ChannelEdit(th.ID, &discordgo.ChannelEdit{Archived: &archived})
	must(t, err)
	if !upd.ThreadMetadata.Archived {
		t.Fatal("not archived")
	}
	// Webhook execute into an archived thread unarchives it.
	_, err = s.WebhookThreadExecute(wh.ID, wh.Token, true, th.ID, &discordgo.WebhookParams{AllowedMentions: quiet(), Content: "wake"})
	must(t, err)
	if c, _ := f.e.Channel(th.ID); c.Archived {
		t.Fatal("webhook send did not unarchive")
	}
	// Deleting a thread: THREAD_DELETE and 10003 afterwards.
	_, err = s.ChannelDelete(th2.ID)
	must(t, err)
	_, err = s.Channel(th2.ID)
	if _, code := restCode(t, err); code != 10003 {
		t.Fatalf("code %d", code)
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	e := f.e
	s := restSession(t, e)
	denied, err := e.AddTextChannel(f.guild.ID, "denied")
	must(t, err)
	hidden, err := e.AddTextChannel(f.guild.ID, "hidden")
	must(t, err)
	must(t, e.DenyBot(denied.ID, discordgo.PermissionSendMessages|discordgo.PermissionManageWebhooks))
	must(t, e.DenyBot(hidden.ID, discordgo.PermissionViewChannel))
	full, err := e.AddTextChannel(f.guild.ID, "full")
	must(t, err)
	for i := 0; i < discordtest.MaxWebhooksPerChannel; i++ {
		_, err := e.AddWebhook(full.ID, "other")
		must(t, err)
	}
	botMsg, err := sendQuiet(s, f.thread.ID, "in thread")
	must(t, err)
	archivedTh, err := e.AddThread(f.ch.ID, "archived", f.alice.ID)
	must(t, err)
	archMsg, err := sendQuiet(s, archivedTh.ID, "before archive")
	must(t, err)
	must(t, e.ArchiveThread(archivedTh.ID))
	lockedTh, err := e.AddThread(f.ch.ID, "locked", f.alice.ID)
	must(t, err)
	must(t, e.LockThread(lockedTh.ID, false))
	wh, err := s.WebhookCreate(f.ch.ID, "relay", "")
	must(t, err)

	cases := []struct {
		name         string
		call         func() error
		status, code int
	}{
		{"unknown channel", func() error { _, err := sendQuiet(s, "123", "x"); return err }, 404, 10003},
		{"unknown message", func() error { _, err := s.ChannelMessage(f.ch.ID, "123"); return err }, 404, 10008},
		{"unknown webhook", func() error {
			_, err := s.WebhookExecute("123", "tok", true, &discordgo.WebhookParams{AllowedMentions: quiet(), Content: "x"})
			return err
		}, 404, 10015},
		{"wrong webhook token", func() error {
			_, err := s.WebhookExecute(wh.ID, "nope", true, &discordgo.WebhookParams{AllowedMentions: quiet(), Content: "x"})
			return err
		}, 401, 50027},
		{"missing access", func() error { _, err := sendQuiet(s, hidden.ID, "x"); return err }, 403, 50001},
		{"missing send permission", func() error { _, err := sendQuiet(s, denied.ID, "x"); return err }, 403, 50013},
		{"missing manage webhooks", func() error { _, err := s.WebhookCreate(denied.ID, "relay", ""); return err }, 403, 50013},
		{"empty message", func() error { _, err := sendQuiet(s, f.ch.ID, ""); return err }, 400, 50006},
		{"too long", func() error { _, err := sendQuiet(s, f.ch.ID, strings.Repeat("é", 2001)); return err }, 400, 50035},
		{"edit too long", func() error {
			_, err := editQuiet(s, f.thread.ID, botMsg.ID, strings.Repeat("x", 2001))
			return err
		}, 400, 50035},
		{"edit in archived thread", func() error {
			_, err := editQuiet(s, archivedTh.ID, archMsg.ID, "edited")
			return err
		}, 400, 50083},
		{"send to locked thread", func() error { _, err := sendQuiet(s, lockedTh.ID, "x"); return err }, 403, 160005},
		{"too many webhooks", func() error { _, err := s.WebhookCreate(full.ID, "relay", ""); return err }, 400, 30007},
	}
	for _, tc := range cases {
		st, code := restCode(t, tc.call())
		if st != tc.status || code != tc.code {
			t.Errorf("%s: got %d/%d, want %d/%d", tc.name, st, code, tc.status, tc.code)
		}
	}
	// A bot send to an archived, unlocked thread unarchives it.
	_, err = sendQuiet(s, archivedTh.ID, "wake up")
	must(t, err)
	if c, _ := e.Channel(archivedTh.ID); c.Archived {
		t.Fatal("send did not unarchive")
	}
	if _, err := editQuiet(s, archivedTh.ID, archMsg.ID, "edited"); err != nil {
		t.Fatalf("edit after unarchive: %v", err)
	}
	if m, _ := e.Message(archMsg.ID); m.Content != "edited" || len(m.History) != 1 {
		t.Fatalf("edited message = %+v", m)
	}
	// Too long error body carries the field error like Discord.
	_, err = sendQuiet(s, f.ch.ID, strings.Repeat("x", 2001))
	var re *discordgo.RESTError
	if !errors.As(err, &re) || !strings.Contains(string(re.ResponseBody), `"content"`) {
		t.Fatalf("50035 body = %s", re.ResponseBody)
	}
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{RateLimits: []discordtest.RateLimit{
		{Method: "POST", Route: "/channels/{channel_id}/messages", Limit: 1, Window: 300 * time.Millisecond},
	}})
	first := restSession(t, f.e)
	_, err := sendQuiet(first, f.ch.ID, "one")
	must(t, err)
	// A second Session has its own limiter, so it hits the emulator's bucket and gets a 429.
	second := restSession(t, f.e)
	_, err = sendQuiet(second, f.ch.ID, "two", discordgo.WithRetryOnRatelimit(false))
	var rle *discordgo.RateLimitError
	if !errors.As(err, &rle) || rle.RetryAfter <= 0 || rle.RetryAfter > 300*time.Millisecond {
		t.Fatalf("want RateLimitError, got %v", err)
	}
	// Another channel is a different bucket.
	other, err := f.e.AddTextChannel(f.guild.ID, "other")
	must(t, err)
	_, err = sendQuiet(second, other.ID, "elsewhere", discordgo.WithRetryOnRatelimit(false))
	must(t, err)
	third := restSession(t, f.e)
	start := time.Now()
	_, err = sendQuiet(third, f.ch.ID, "three") // 429, sleeps retry_after, succeeds
	must(t, err)
	if time.Since(start) > 2*time.Second {
		t.Fatalf("retry took %v", time.Since(start))
	}
	st := f.e.RateLimited()
	if st.Total < 1 || st.Global != 0 {
		t.Fatalf("stats = %+v", st)
	}
	reqs := f.e.RequestsTo("POST", "/channels/{channel_id}/messages")
	if n := len(reqs); n < 4 {
		t.Fatalf("requests = %d", n)
	}

	// Headers and the 429 body, seen with a plain client.
	f.e.SetGlobalLimit(2, time.Minute)
	c := f.e.HTTPClient()
	var last *http.Response
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("GET", "https://discord.com/api/v9/users/@me", nil)
		req.Header.Set("Authorization", "Bot "+f.e.Token())
		resp, err := c.Do(req)
		must(t, err)
		if resp.Header.Get("X-RateLimit-Bucket") == "" {
			t.Fatal("missing X-RateLimit-Bucket")
		}
		if i < 2 {
			_ = resp.Body.Close()
		}
		last = resp
	}
	defer func() { _ = last.Body.Close() }()
	var body struct {
		Message    string  `json:"message"`
		RetryAfter float64 `json:"retry_after"`
		Global     bool    `json:"global"`
	}
	must(t, json.NewDecoder(last.Body).Decode(&body))
	if last.StatusCode != 429 || !body.Global || body.RetryAfter <= 0 || last.Header.Get("Retry-After") == "" ||
		last.Header.Get("X-RateLimit-Scope") != "global" {
		t.Fatalf("global 429: %d %+v %v", last.StatusCode, body, last.Header)
	}
	if f.e.RateLimited().Global != 1 {
		t.Fatalf("global count %+v", f.e.RateLimited())
	}
}

func TestInjectedFaultsAndAmbiguousCreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	s := restSession(t, f.e)
	f.e.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/messages", Mode: discordtest.FaultDropAfterCommit})
	_, err := sendQuiet(s, f.ch.ID, "ambiguous")
	if err == nil {
		t.Fatal("dropped response returned no error")
	}
	list, err := s.ChannelMessages(f.ch.ID, 10, "", "", "")
	must(t, err)
	if len(list) != 1 || list[0].Content != "ambiguous" {
		t.Fatalf("list after ambiguous create = %+v", list)
	}
	f.e.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/{channel_id}/messages", Mode: discordtest.Fault500AfterCommit})
	_, err = sendQuiet(s, f.ch.ID, "committed-500")
	if st, _ := restCode(t, err); st != 500 {
		t.Fatalf("status %d", st)
	}
	f.e.InjectFault(discordtest.Fault{Path: "/channels/*/messages", Times: 2, Status: 403, Code: 50013, Message: "Missing Permissions"})
	for i := 0; i < 2; i++ {
		_, err = sendQuiet(s, f.ch.ID, "rejected")
		if _, code := restCode(t, err); code != 50013 {
			t.Fatalf("code %d", code)
		}
	}
	f.e.InjectFault(discordtest.Fault{Path: "/channels/*/messages", Status: 429, RetryAfter: 50 * time.Millisecond})
	f.e.InjectFault(discordtest.Fault{Path: "/channels/*/messages", Latency: 50 * time.Millisecond})
	start := time.Now()
	_, err = sendQuiet(s, f.ch.ID, "after 429")
	must(t, err)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("429 + latency took only %v", d)
	}
	msgs := f.e.Messages(f.ch.ID)
	if len(msgs) != 3 || msgs[1].Content != "committed-500" || msgs[2].Content != "after 429" {
		t.Fatalf("messages = %+v", msgs)
	}
	if f.e.RateLimited().Total != 1 {
		t.Fatalf("429 count %+v", f.e.RateLimited())
	}
	// Pagination: before/after.
	older, err := s.ChannelMessages(f.ch.ID, 2, msgs[2].ID, "", "")
	must(t, err)
	if len(older) != 2 || older[0].ID != msgs[1].ID || older[1].ID != msgs[0].ID {
		t.Fatalf("before page = %v", older)
	}
	newer, err := s.ChannelMessages(f.ch.ID, 1, "", msgs[0].ID, "")
	must(t, err)
	if len(newer) != 1 || newer[0].ID != msgs[1].ID {
		t.Fatalf("after page = %v", newer)
	}
}

type nonceSend struct {
	Content         string                            `json:"content"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions"`
	Nonce           string                            `json:"nonce"`
	EnforceNonce    bool                              `json:"enforce_nonce"`
}

func TestNonceDedupe(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	s := restSession(t, f.e)
	send := func(content string) *discordgo.Message {
		ep := discordgo.EndpointChannelMessages(f.ch.ID)
		b, err := s.RequestWithBucketID("POST", ep, nonceSend{Content: content, AllowedMentions: quiet(), Nonce: "delivery-1", EnforceNonce: true}, ep)
		must(t, err)
		var m discordgo.Message
		must(t, json.Unmarshal(b, &m))
		return &m
	}
	a := send("first")
	b := send("retry")
	if a.ID != b.ID || b.Content != "first" {
		t.Fatalf("dedupe failed: %s/%s %q", a.ID, b.ID, b.Content)
	}
	if n := len(f.e.Messages(f.ch.ID)); n != 1 {
		t.Fatalf("messages = %d", n)
	}
	if m := f.e.Messages(f.ch.ID)[0]; m.Nonce != "delivery-1" {
		t.Fatalf("nonce = %q", m.Nonce)
	}
}

func TestResumeAfterDrop(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	got := make(chan string, 8)
	resumed := make(chan struct{}, 2)
	openSession(t, f.e, func(s *discordgo.Session) {
		s.ShouldReconnectOnError = true
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { got <- m.Content })
		s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Resumed) { resumed <- struct{}{} })
	})
	_, err := f.e.UserSay(f.ch.ID, f.alice.ID, "before")
	must(t, err)
	if c := <-got; c != "before" {
		t.Fatal(c)
	}
	hb := f.e.GatewayStats().Heartbeats
	f.e.GatewayDrop()
	_, err = f.e.UserSay(f.ch.ID, f.alice.ID, "during drop")
	must(t, err)
	select {
	case c := <-got:
		if c != "during drop" {
			t.Fatal(c)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("missed event not replayed")
	}
	<-resumed
	st := f.e.GatewayStats()
	if st.Resumes != 1 || st.Identifies != 1 {
		t.Fatalf("stats = %+v", st)
	}
	// Wait for the new connection's first heartbeat so Close does not race the heartbeat goroutine.
	must(t, f.e.WaitHeartbeats(ctxT(t), hb+1))
}

func TestReconnectAndInvalidSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	readies := make(chan struct{}, 4)
	openSession(t, f.e, func(s *discordgo.Session) {
		s.ShouldReconnectOnError = true
		s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Ready) { readies <- struct{}{} })
	})
	<-readies
	hb := f.e.GatewayStats().Heartbeats
	f.e.GatewayReconnect()
	ctx := ctxT(t)
	must(t, f.e.Wait(ctx, func() bool { return f.e.GatewayStats().Resumes == 1 }))
	// The resumed connection's heartbeat goroutine must have beaten before Close (gotcha 8).
	must(t, f.e.WaitHeartbeats(ctx, hb+1))
	f.e.GatewayInvalidateSessions(false)
	<-readies
	st := f.e.GatewayStats()
	if st.Identifies != 2 || st.Sessions != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestInteractions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	s := openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
			d := ic.ApplicationCommandData()
			topic := d.Options[0].StringValue()
			if d.Name == "quiet" {
				check(t, s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
					Type: discordgo.InteractionResponseChannelMessageWithSource,
					Data: &discordgo.InteractionResponseData{AllowedMentions: quiet(), Content: "only you", Flags: discordgo.MessageFlagsEphemeral},
				}))
				return
			}
			check(t, s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}))
			content := "started " + topic
			_, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: &content, AllowedMentions: quiet()})
			check(t, err)
			_, err = s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{AllowedMentions: quiet(), Content: "secret", Flags: discordgo.MessageFlagsEphemeral})
			check(t, err)
			_, err = s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{AllowedMentions: quiet(), Content: "public follow-up"})
			check(t, err)
		})
	})
	opt := []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "topic", Description: "t", Required: true}}
	_, err := s.ApplicationCommandBulkOverwrite(f.e.ApplicationID(), f.guild.ID, []*discordgo.ApplicationCommand{
		{Name: "spawn", Description: "spawn a session", Options: opt},
		{Name: "quiet", Description: "ephemeral", Options: opt},
	})
	must(t, err)
	if cmds := f.e.Commands(f.guild.ID); len(cmds) != 2 {
		t.Fatalf("commands = %+v", cmds)
	}
	in, err := f.e.InvokeCommand(f.ch.ID, f.alice.ID, "spawn", discordtest.CommandOption{Name: "topic", Value: "go"})
	must(t, err)
	ctx := ctxT(t)
	got, err := f.e.WaitResponses(ctx, in.ID, 4)
	must(t, err)
	msgs := f.e.Messages(f.ch.ID)
	if len(msgs) != 2 || msgs[0].Content != "started go" || msgs[0].WebhookID != f.e.ApplicationID() ||
		msgs[0].Flags&discordtest.FlagLoading != 0 || msgs[1].Content != "public follow-up" || got.OriginalID != msgs[0].ID {
		t.Fatalf("displayed = %+v", msgs)
	}
	if !got.Responses[2].Ephemeral || got.Responses[2].Content != "secret" || got.Responses[2].MessageID != "" {
		t.Fatalf("ephemeral follow-up = %+v", got.Responses[2])
	}
	q, err := f.e.InvokeCommand(f.ch.ID, f.alice.ID, "quiet", discordtest.CommandOption{Name: "topic", Value: "x"})
	must(t, err)
	qr, err := f.e.WaitResponses(ctx, q.ID, 1)
	must(t, err)
	if !qr.Responses[0].Ephemeral || len(f.e.Messages(f.ch.ID)) != 2 {
		t.Fatalf("ephemeral callback displayed: %+v", qr)
	}
	if _, err := f.e.InvokeCommand(f.ch.ID, f.alice.ID, "nope"); err == nil {
		t.Fatal("unregistered command invoked")
	}
}

func TestDirectMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	s := restSession(t, f.e)
	dm, err := s.UserChannelCreate(f.alice.ID)
	must(t, err)
	if dm.Type != discordgo.ChannelTypeDM || len(dm.Recipients) != 1 || dm.Recipients[0].ID != f.alice.ID {
		t.Fatalf("dm = %+v", dm)
	}
	_, err = sendQuiet(s, dm.ID, "hi alice")
	must(t, err)
	in, err := f.e.UserDM(f.alice.ID, "hi bot")
	must(t, err)
	if in.ChannelID != dm.ID || len(f.e.Messages(dm.ID)) != 2 {
		t.Fatalf("dm messages = %+v", f.e.Messages(dm.ID))
	}
}

func TestRefereeFlagsBadRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	c := f.e.HTTPClient()
	req, _ := http.NewRequest("POST", "https://discord.com/api/v9/channels/"+f.ch.ID+"/messages?bogus=1",
		strings.NewReader(`{"content":"x","not_a_field":true,"allowed_mentions":{"parse":[]}}`))
	req.Header.Set("Authorization", "Bot "+f.e.Token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	must(t, err)
	_ = resp.Body.Close()
	req, _ = http.NewRequest("GET", "https://discord.com/api/v9/no/such/route", nil)
	resp, err = c.Do(req)
	must(t, err)
	_ = resp.Body.Close()
	kinds := map[string]bool{}
	for _, v := range f.e.Violations() {
		kinds[v.Kind] = true
	}
	for _, k := range []string{"unknown-query", "unknown-body-field", "unknown-route", "unimplemented"} {
		if !kinds[k] {
			t.Errorf("missing violation %s in %v", k, f.e.Violations())
		}
	}
	f.e.ResetViolations() // deliberate; NewTest's cleanup would otherwise fail the test
}

func TestMultipleSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	a, b := make(chan string, 2), make(chan string, 2)
	openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { a <- m.ID })
	})
	openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { b <- m.ID })
	})
	m, err := f.e.UserSay(f.ch.ID, f.alice.ID, "to everyone")
	must(t, err)
	if x, y := <-a, <-b; x != m.ID || y != m.ID {
		t.Fatalf("sessions saw %s and %s, want %s", x, y, m.ID)
	}
	if st := f.e.GatewayStats(); st.Sessions != 2 || st.Connections != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestMessageContentIntent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	got := make(chan string, 2)
	openSession(t, f.e, func(s *discordgo.Session) {
		s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages // no MessageContent
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { got <- m.Content })
	})
	_, err := f.e.UserSay(f.ch.ID, f.alice.ID, "secret")
	must(t, err)
	_, err = f.e.UserSay(f.ch.ID, f.alice.ID, "hey <@"+f.e.BotUserID()+">")
	must(t, err)
	// discordgo runs handlers on their own goroutines: the two may arrive in either order.
	a, b := <-got, <-got
	if a != "" {
		a, b = b, a
	}
	if a != "" || b == "" {
		t.Fatalf("without the intent got %q and %q, want one blanked and the mention kept", a, b)
	}
}

func TestZombieConnectionResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{HeartbeatInterval: 50 * time.Millisecond})
	resumed := make(chan struct{}, 1)
	openSession(t, f.e, func(s *discordgo.Session) {
		s.ShouldReconnectOnError = true
		s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Resumed) { resumed <- struct{}{} })
	})
	f.e.SetHeartbeatAck(false)
	ctx := ctxT(t)
	// discordgo gives up after 5 unacknowledged intervals, closes (1 s) and resumes.
	must(t, f.e.Wait(ctx, func() bool { return f.e.GatewayStats().Connections == 0 }))
	f.e.SetHeartbeatAck(true)
	select {
	case <-resumed:
	case <-ctx.Done():
		t.Fatal("no resume after zombie connection")
	}
	hb := f.e.GatewayStats().Heartbeats
	must(t, f.e.WaitHeartbeats(ctx, hb+1))
}

// quiet is the allowed_mentions every bot send carries (the emulator rejects a send without it).
func quiet() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

func sendQuiet(s *discordgo.Session, channelID, content string, opts ...discordgo.RequestOption) (*discordgo.Message, error) {
	return s.ChannelMessageSendComplex(channelID, &discordgo.MessageSend{Content: content, AllowedMentions: quiet()}, opts...)
}

func editQuiet(s *discordgo.Session, channelID, messageID, content string) (*discordgo.Message, error) {
	return s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: messageID, Channel: channelID, Content: &content, AllowedMentions: quiet()})
}

// A fault with After lets that many matching calls through first: the
// second part of a split reply can be refused while the first is shown.
func TestFaultAfterSkipsMatchingCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	s := restSession(t, f.e)
	f.e.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/messages", After: 1, Status: 403, Code: 50013, Message: "Missing Permissions"})
	send := func(text string) error {
		_, err := sendQuiet(s, f.ch.ID, text)
		return err
	}
	must(t, send("part 1"))
	if _, code := restCode(t, send("part 2")); code != 50013 {
		t.Fatalf("second call: code %d, want 50013", code)
	}
	must(t, send("part 3"))
	if msgs := f.e.Messages(f.ch.ID); len(msgs) != 2 || msgs[0].Content != "part 1" || msgs[1].Content != "part 3" {
		t.Fatalf("messages = %+v", msgs)
	}
}

// testClock is a settable clock for the emulator's time rules.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestNonceForgottenAfterWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		window  time.Duration
		advance time.Duration
		dedupe  bool
	}{
		{"default window, inside", 0, 4 * time.Minute, true},
		{"default window, past", 0, 5*time.Minute + time.Second, false},
		{"configured window, past", time.Minute, 61 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			f := newFixture(t, discordtest.Options{Now: clk.Now, NonceWindow: tc.window})
			s := restSession(t, f.e)
			ep := discordgo.EndpointChannelMessages(f.ch.ID)
			send := func(content string) string {
				b, err := s.RequestWithBucketID("POST", ep, nonceSend{Content: content, AllowedMentions: quiet(), Nonce: "delivery-1", EnforceNonce: true}, ep)
				must(t, err)
				var m discordgo.Message
				must(t, json.Unmarshal(b, &m))
				return m.ID
			}
			first := send("first")
			clk.Advance(tc.advance)
			second := send("first")
			if got := first == second; got != tc.dedupe {
				t.Fatalf("deduped = %v, want %v (messages %d)", got, tc.dedupe, len(f.e.Messages(f.ch.ID)))
			}
			want := 1
			if !tc.dedupe {
				want = 2
			}
			if n := len(f.e.Messages(f.ch.ID)); n != want {
				t.Fatalf("messages = %d, want %d", n, want)
			}
		})
	}
}

func TestInteractionDeadlines(t *testing.T) {
	t.Parallel()
	clk := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFixture(t, discordtest.Options{Now: clk.Now})
	s := restSession(t, f.e)
	_, err := s.ApplicationCommandBulkOverwrite(f.e.ApplicationID(), f.guild.ID, []*discordgo.ApplicationCommand{{Name: "ping", Description: "p"}})
	must(t, err)
	invoke := func() *discordgo.Interaction {
		in, err := f.e.InvokeCommand(f.ch.ID, f.alice.ID, "ping")
		must(t, err)
		return &discordgo.Interaction{ID: in.ID, Token: in.Token, AppID: f.e.ApplicationID()}
	}
	reply := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource, Data: &discordgo.InteractionResponseData{Content: "pong", AllowedMentions: quiet()}}

	late := invoke()
	clk.Advance(3*time.Second + time.Millisecond)
	if status, code := restCode(t, s.InteractionRespond(late, reply)); status != http.StatusNotFound || code != 10062 {
		t.Fatalf("late callback = %d/%d, want 404/10062", status, code)
	}
	if n := len(f.e.Messages(f.ch.ID)); n != 0 {
		t.Fatalf("late callback displayed %d messages", n)
	}

	in := invoke()
	clk.Advance(2 * time.Second)
	must(t, s.InteractionRespond(in, reply))
	clk.Advance(14 * time.Minute)
	content := "edited"
	_, err = s.InteractionResponseEdit(in, &discordgo.WebhookEdit{Content: &content, AllowedMentions: quiet()})
	must(t, err)
	_, err = s.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "more", AllowedMentions: quiet()})
	must(t, err)
	clk.Advance(time.Minute + time.Second)
	_, err = s.InteractionResponse(in)
	if status, code := restCode(t, err); status != http.StatusUnauthorized || code != 50027 {
		t.Fatalf("GET @original after 15 min = %d/%d", status, code)
	}
	_, err = s.InteractionResponseEdit(in, &discordgo.WebhookEdit{Content: &content, AllowedMentions: quiet()})
	if status, code := restCode(t, err); status != http.StatusUnauthorized || code != 50027 {
		t.Fatalf("edit @original after 15 min = %d/%d", status, code)
	}
	_, err = s.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "late", AllowedMentions: quiet()})
	if status, code := restCode(t, err); status != http.StatusUnauthorized || code != 50027 {
		t.Fatalf("followup after 15 min = %d/%d", status, code)
	}
}

// Typing is limited per channel even when a test configures no limits:
// the bot must pace its typing indicator, never relying on a kind emulator.
func TestTypingAlwaysRateLimited(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	f := newFixture(t, discordtest.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	s := restSession(t, f.e)
	for i := range discordtest.TypingLimit.Limit {
		if err := s.ChannelTyping(f.ch.ID, discordgo.WithRetryOnRatelimit(false)); err != nil {
			t.Fatalf("typing %d: %v", i, err)
		}
	}
	// A fresh client (no bucket state of its own) reaches the emulator's bucket.
	var rle *discordgo.RateLimitError
	if err := restSession(t, f.e).ChannelTyping(f.ch.ID, discordgo.WithRetryOnRatelimit(false)); !errors.As(err, &rle) {
		t.Fatalf("typing past the limit: want a 429, got %v", err)
	}
	mu.Lock()
	now = now.Add(discordtest.TypingLimit.Window)
	mu.Unlock()
	if err := restSession(t, f.e).ChannelTyping(f.ch.ID, discordgo.WithRetryOnRatelimit(false)); err != nil {
		t.Fatalf("typing after the window: %v", err)
	}
	if n := len(f.e.RequestsTo("POST", "/channels/{channel_id}/typing")); n != discordtest.TypingLimit.Limit+2 {
		t.Fatalf("recorded %d typing calls", n)
	}
}

// TestUserEditsAndDeletions: a user's edit and deletion and a moderator's bulk delete reach
// discordgo as MESSAGE_UPDATE, MESSAGE_DELETE and MESSAGE_DELETE_BULK; only a message's
// author may edit or delete it as a user.
func TestUserEditsAndDeletions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	updates := make(chan *discordgo.MessageUpdate, 4)
	deletes := make(chan *discordgo.MessageDelete, 4)
	bulks := make(chan *discordgo.MessageDeleteBulk, 4)
	s := openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageUpdate) { updates <- m })
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageDelete) { deletes <- m })
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageDeleteBulk) { bulks <- m })
	})
	m1, err := f.e.UserSay(f.ch.ID, f.alice.ID, "typo")
	must(t, err)
	_, err = f.e.UserEdit(m1.ID, "fixed")
	must(t, err)
	if u := <-updates; u.ID != m1.ID || u.Content != "fixed" || u.EditedTimestamp == nil || u.Author == nil || u.Author.ID != f.alice.ID {
		t.Fatalf("update = %+v", u.Message)
	}
	bot, err := s.ChannelMessageSendComplex(f.ch.ID, &discordgo.MessageSend{Content: "mine", AllowedMentions: quiet()})
	must(t, err)
	if _, err := f.e.UserEdit(bot.ID, "hijack"); err == nil {
		t.Fatal("a user edited the bot's message")
	}
	if err := f.e.UserDelete(f.alice.ID, bot.ID); err == nil {
		t.Fatal("a user deleted the bot's message as its author")
	}
	must(t, f.e.UserDelete(f.alice.ID, m1.ID))
	if d := <-deletes; d.ID != m1.ID || d.ChannelID != f.ch.ID || d.GuildID != f.guild.ID {
		t.Fatalf("delete = %+v", d.Message)
	}
	m2, err := f.e.UserSay(f.ch.ID, f.alice.ID, "two")
	must(t, err)
	if err := f.e.BulkDelete(f.ch.ID, []string{m2.ID}); err == nil {
		t.Fatal("bulk delete of one message accepted (Discord wants 2 to 100)")
	}
	must(t, f.e.BulkDelete(f.ch.ID, []string{m2.ID, bot.ID}))
	if b := <-bulks; len(b.Messages) != 2 || b.Messages[0] != m2.ID || b.Messages[1] != bot.ID || b.ChannelID != f.ch.ID {
		t.Fatalf("bulk = %+v", b)
	}
	if got := f.e.Messages(f.ch.ID); len(got) != 0 {
		t.Fatalf("messages left: %+v", got)
	}
}

// Message edits are limited per channel even when a test configures no
// limits (Discord: about 5 per 5 s), across the channel's messages.
func TestEditsAlwaysRateLimited(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	f := newFixture(t, discordtest.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	s := restSession(t, f.e)
	a, err := s.ChannelMessageSendComplex(f.ch.ID, &discordgo.MessageSend{Content: "a", AllowedMentions: quiet()})
	must(t, err)
	b, err := s.ChannelMessageSendComplex(f.ch.ID, &discordgo.MessageSend{Content: "b", AllowedMentions: quiet()})
	must(t, err)
	edit := func(id, text string) error {
		_, err := restSession(t, f.e).ChannelMessageEditComplex(&discordgo.MessageEdit{ID: id, Channel: f.ch.ID, Content: &text, AllowedMentions: quiet()},
			discordgo.WithRetryOnRatelimit(false))
		return err
	}
	for i := range discordtest.EditLimit.Limit {
		id := a.ID
		if i%2 == 1 {
			id = b.ID
		}
		if err := edit(id, fmt.Sprint("edit ", i)); err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
	}
	var rle *discordgo.RateLimitError
	if err := edit(b.ID, "one too many"); !errors.As(err, &rle) {
		t.Fatalf("edit past the limit: want a 429, got %v", err)
	}
	mu.Lock()
	now = now.Add(discordtest.EditLimit.Window)
	mu.Unlock()
	must(t, edit(b.ID, "after the window"))
	if m, _ := f.e.Message(b.ID); m.Content != "after the window" {
		t.Fatalf("content %q", m.Content)
	}
}

// Buttons: validated on create and edit, replaced by an edit's components
// ([] removes them); ClickButton reaches discordgo as a component
// interaction whose answer keeps the 3 s deadline.
func TestButtonsOnEditAndClickDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFixture(t, discordtest.Options{Now: clock})
	clicks := make(chan *discordgo.InteractionCreate, 4)
	s := openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { clicks <- i })
	})
	row := func(ids ...string) []discordgo.MessageComponent {
		var bs []discordgo.MessageComponent
		for _, id := range ids {
			bs = append(bs, discordgo.Button{Label: "Stop", Style: discordgo.SecondaryButton, CustomID: id})
		}
		return []discordgo.MessageComponent{discordgo.ActionsRow{Components: bs}}
	}
	if _, err := s.ChannelMessageSendComplex(f.ch.ID, &discordgo.MessageSend{Content: "x", AllowedMentions: quiet(), Components: row("a", "a")}); err == nil {
		t.Fatal("duplicate custom ids accepted")
	}
	if _, err := s.ChannelMessageSendComplex(f.ch.ID, &discordgo.MessageSend{Content: "x", AllowedMentions: quiet(), Components: row(strings.Repeat("x", 101))}); err == nil {
		t.Fatal("a 101-character custom id accepted")
	}
	m, err := s.ChannelMessageSendComplex(f.ch.ID, &discordgo.MessageSend{Content: "live", AllowedMentions: quiet(), Components: row("stop:1")})
	must(t, err)
	if got, _ := f.e.Message(m.ID); !slices.Equal(got.ButtonIDs(), []string{"stop:1"}) {
		t.Fatalf("buttons %v", got.Buttons())
	}
	in, err := f.e.ClickButton(m.ID, f.alice.ID, "stop:1")
	must(t, err)
	got := <-clicks
	if got.Type != discordgo.InteractionMessageComponent || got.MessageComponentData().CustomID != "stop:1" || got.Message == nil || got.Message.ID != m.ID || got.Member == nil || got.Member.User.ID != f.alice.ID {
		t.Fatalf("click = %+v", got.Interaction)
	}
	if _, err := f.e.ClickButton(m.ID, f.alice.ID, "nope"); err == nil {
		t.Fatal("a click on a button the message lacks")
	}
	mu.Lock()
	now = now.Add(3*time.Second + time.Millisecond)
	mu.Unlock()
	err = s.InteractionRespond(got.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: "late", Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: quiet()}})
	if status, code := restCode(t, err); status != http.StatusNotFound || code != 10062 {
		t.Fatalf("answer after 3 s = %d/%d", status, code)
	}
	if r, _ := f.e.Interaction(in.ID); len(r.Responses) != 0 {
		t.Fatalf("responses %+v", r.Responses)
	}
	empty := []discordgo.MessageComponent{}
	text := "done"
	_, err = s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: m.ID, Channel: f.ch.ID, Content: &text, Components: &empty, AllowedMentions: quiet()})
	must(t, err)
	if got, _ := f.e.Message(m.ID); len(got.Buttons()) != 0 || got.Content != "done" {
		t.Fatalf("after the edit: %q buttons %v", got.Content, got.Buttons())
	}
}
