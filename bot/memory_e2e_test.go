package bot

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/store/postgres"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

// memoryWorld: #general everyone sees; #secret only bob (a channel
// permission overwrite) and the bot; memory on.
type memoryWorld struct {
	*harness
	bob    discordtest.User
	secret discordtest.Channel
}

func memoryStart(t *testing.T, dsn string) *memoryWorld {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Provider: echo.New(),
		Configure: func(c *config.Config) {
			c.Memory.Enabled = true
			if dsn != "" {
				c.Store.Driver, c.Store.DSN = "postgres", dsn
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	w := &memoryWorld{harness: h}
	e, g := h.emu, h.guild.ID
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.SetRolePermissions(g, g, discordtest.DefaultEveryone))
	w.bob, err = e.AddMember(g, "bob")
	must(err)
	w.secret, err = e.AddTextChannel(g, "secret")
	must(err)
	must(e.SetOverwrite(w.secret.ID, discordtest.Overwrite{ID: g, Type: discordtest.OverwriteRole, Deny: discordgo.PermissionViewChannel}))
	for _, id := range []string{w.bob.ID, e.BotUserID()} {
		must(e.SetOverwrite(w.secret.ID, discordtest.Overwrite{ID: id, Type: discordtest.OverwriteMember, Allow: discordgo.PermissionViewChannel}))
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return w
}

// ask posts text to the bot as user and returns the user's message and
// the bot's reply to it.
func (w *memoryWorld) ask(t *testing.T, channel, user, text string) (discordtest.Message, discordtest.Message) {
	t.Helper()
	m, err := w.emu.UserSay(channel, user, fmt.Sprintf("<@%s> %s", w.emu.BotUserID(), text))
	if err != nil {
		t.Fatal(err)
	}
	var reply discordtest.Message
	waitUntil(t, w.harness, "the reply to "+m.ID, func() bool {
		for _, x := range w.emu.Messages(channel) {
			if x.Author.ID == w.emu.BotUserID() && x.MessageReference != nil && x.MessageReference.MessageID == m.ID {
				reply = x
				return true
			}
		}
		return false
	})
	return m, reply
}

// indexed applies every queued transcript change to the index now (the
// running indexer polls; applying a change twice is harmless).
func (w *memoryWorld) indexed(t *testing.T) {
	t.Helper()
	for range 100 {
		n, err := w.app.recall.indexer.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the change queue does not drain")
}

// recall runs the recall tool as user in #general and returns its result.
func (w *memoryWorld) recall(t *testing.T, user, query string) string {
	t.Helper()
	w.indexed(t)
	_, reply := w.ask(t, w.general.ID, user, "\n"+`!tool recall {"query": "`+query+`"}`)
	out, ok := strings.CutPrefix(reply.Content, "tool results:\n- recall: ")
	if !ok {
		t.Fatalf("recall answered %q", reply.Content)
	}
	return out
}

// TestMemoryE2ERecall: alice's recall finds what she can view, never a
// channel a permission overwrite hides from her; a deleted message is
// never recalled; what /reset hid from the model is still found; turned
// off, the next turn's recall is not available.
func TestMemoryE2ERecall(t *testing.T) {
	t.Parallel()
	testMemoryRecall(t, "")
}

// TestMemoryE2ERecallOnPostgres: the same with the index in PostgreSQL.
func TestMemoryE2ERecallOnPostgres(t *testing.T) {
	testMemoryRecall(t, pgtest.DSN(t))
}

func testMemoryRecall(t *testing.T, dsn string) {
	w := memoryStart(t, dsn)
	if st, ok := w.app.store.(*postgres.Store); ok {
		// The indexer runs in the leader, which settles before it leads.
		waitFor(t, "the leader's first index build", func() bool {
			built, err := st.RecallIndex().Built(t.Context())
			return err == nil && built
		})
	}
	gen, sec, alice, bob := w.general.ID, w.secret.ID, w.alice.ID, w.bob.ID
	dawn, _ := w.ask(t, gen, alice, "zebra launch at dawn")
	w.ask(t, sec, bob, "zebra password swordfish")
	gone, goneReply := w.ask(t, gen, alice, "ephemeral kumquat")

	if got := w.recall(t, alice, "zebra"); !strings.Contains(got, "launch at dawn") || strings.Contains(got, "swordfish") || !strings.Contains(got, dawn.ID) {
		t.Fatalf("alice's recall:\n%s\nwant #general's zebra (message %s), never #secret's", got, dawn.ID)
	}
	// /memory search: the same search with the caller's authority, shown
	// to the caller alone.
	in, err := w.emu.InvokeCommand(gen, alice, "memory", discordtest.CommandOption{Name: "search", Value: []discordtest.CommandOption{{Name: "query", Value: "zebra"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ans, inter, err := w.emu.WaitAnswer(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !inter.Responses[0].Ephemeral || !strings.Contains(ans.Content, "launch at dawn") || strings.Contains(ans.Content, "swordfish") {
		t.Fatalf("/memory search answered %+v (first response %+v): want alice's view, ephemeral", ans, inter.Responses[0])
	}
	if got := w.recall(t, bob, "swordfish"); !strings.Contains(got, "zebra password swordfish") || !strings.Contains(got, "channel:"+sec) {
		t.Fatalf("bob's recall:\n%s\nwant #secret's message", got)
	}

	for _, id := range []string{gone.ID, goneReply.ID} {
		if err := w.emu.DeleteMessage(id); err != nil {
			t.Fatal(err)
		}
	}
	w.ask(t, gen, alice, "barrier") // the gateway's events are handled in order: the deletions are recorded
	if got := w.recall(t, alice, "kumquat"); strings.Contains(got, "ephemeral kumquat") {
		t.Fatalf("a deleted message is recalled:\n%s", got)
	}

	in, err = w.emu.InvokeCommand(gen, alice, "reset")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.emu.WaitAnswer(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if got := w.recall(t, alice, "dawn"); !strings.Contains(got, dawn.ID) {
		t.Fatalf("after /reset alice's recall:\n%s\nwant the earlier message %s", got, dawn.ID)
	}
	// Turned off (what SIGHUP applies): the next turn is offered no recall
	// tool, and a model that calls it anyway is told it is not available.
	if !w.app.recall.setOn(false) {
		t.Fatal("memory could not be turned off")
	}
	w.indexed(t)
	if _, reply := w.ask(t, gen, alice, "\n"+`!tool recall {"query": "dawn"}`); strings.Contains(reply.Content, "dawn") || !strings.Contains(reply.Content, "not available") {
		t.Fatalf("with memory off, recall answered %q", reply.Content)
	}

	if dsn == "" {
		finishBot(t, w.harness, gen, sec).Close()
	} else if err := w.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryE2ERecallOnMatrix: on a real homeserver, alice's recall finds
// her room's messages and never those of bob's room, where she is no
// member; !memory search (its reply is public) searches only the room it
// runs in.
func TestMemoryE2ERecallOnMatrix(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	bob := w.srv.Register(t, "bob", false)
	var created struct {
		RoomID string `json:"room_id"`
	}
	w.do(t, bob.AccessToken, "POST", "/createRoom", map[string]any{"preset": "private_chat", "invite": []string{w.bot.UserID}}, &created)
	w.do(t, w.bot.AccessToken, "POST", "/join/"+url.PathEscape(created.RoomID), map[string]any{}, nil)
	bobRoom := created.RoomID
	h := startMatrixBot(t, w, func(c *config.Config) { c.Memory.Enabled = true })

	w.say(t, w.room, "", "bot: zebra alpha in alice's room", true)
	waitFor(t, "the answer in alice's room", func() bool { return len(w.botReplies(t, w.room, w.room)) == 1 })
	content := map[string]any{"msgtype": "m.text", "body": "bot: zebra secret in bob's room", "m.mentions": map[string]any{"user_ids": []string{w.bot.UserID}}}
	w.do(t, bob.AccessToken, "PUT", fmt.Sprintf("/rooms/%s/send/m.room.message/b%d", url.PathEscape(bobRoom), w.txn.Add(1)), content, nil)
	// The test reads rooms as alice, who is not in bob's: wait for the
	// answer in the room's transcript.
	bobKey := sessionkey.ForConversation("main", binding.ConversationRef{Channel: "matrix", ConversationID: bobRoom})
	waitFor(t, "the answer in bob's room", func() bool {
		es, err := h.app.store.Tail(t.Context(), bobKey, 5)
		return err == nil && len(es) == 2
	})
	drain := func() {
		for range 100 {
			if n, err := h.app.recall.indexer.Step(t.Context()); err != nil {
				t.Fatal(err)
			} else if n == 0 {
				return
			}
		}
		t.Fatal("the change queue does not drain")
	}
	drain()

	w.say(t, w.room, "", "bot:\n"+`!tool recall {"query": "zebra"}`, true)
	var got string
	waitFor(t, "alice's recall", func() bool {
		rs := w.botReplies(t, w.room, w.room)
		if len(rs) < 2 {
			return false
		}
		got = rs[len(rs)-1].Content
		return true
	})
	if !strings.Contains(got, "zebra alpha") || strings.Contains(got, "zebra secret") {
		t.Fatalf("alice's recall on Matrix:\n%s\nwant her room's message, never bob's", got)
	}
	drain()
	w.say(t, w.room, "", "!memory search zebra", false)
	waitFor(t, "!memory search's answer", func() bool {
		rs := w.botReplies(t, w.room, w.room)
		if len(rs) < 3 {
			return false
		}
		got = rs[len(rs)-1].Content
		return true
	})
	if !strings.Contains(got, "zebra alpha") || strings.Contains(got, "zebra secret") {
		t.Fatalf("!memory search on Matrix:\n%s\nwant this room's message only", got)
	}
	// alice joins bob's room now, only so the Rule 1 check (which reads
	// rooms as alice) sees what it displays.
	w.do(t, bob.AccessToken, "POST", "/rooms/"+url.PathEscape(bobRoom)+"/invite", map[string]any{"user_id": w.alice.UserID}, nil)
	w.do(t, w.alice.AccessToken, "POST", "/join/"+url.PathEscape(bobRoom), map[string]any{}, nil)
	finishMatrixBot(t, h, w, []string{w.room, bobRoom})
}
