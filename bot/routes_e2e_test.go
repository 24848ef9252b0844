package bot

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
)

// personaModel answers "<first line of the system prompt> | <last user
// text>": which persona answered is visible in the chat.
type personaModel struct{}

func (personaModel) Complete(_ context.Context, req model.Request) (model.Response, error) {
	last := ""
	for _, m := range req.Messages {
		if m.Role == model.RoleUser {
			last = m.Text
		}
	}
	persona, _, _ := strings.Cut(req.System, "\n")
	return model.Response{Text: persona + " | " + last}, nil
}

// rtSay posts text mentioning the bot in channel as alice and waits for the
// n-th message there.
func rtSay(t *testing.T, h *harness, channel, text string, n int) []discordtest.Message {
	t.Helper()
	if _, err := h.emu.UserSay(channel, h.alice.ID, "<@"+h.emu.BotUserID()+"> "+text); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	msgs, err := h.emu.WaitMessages(ctx, channel, n)
	if err != nil {
		t.Fatalf("waiting for %d messages in %s: %v (shown: %q)", n, channel, err, contents(h.emu.Messages(channel)))
	}
	return msgs
}

func contents(msgs []discordtest.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}

// TestRoutesE2ETwoChannelsTwoAgents (issue 32 item 1): two channels routed
// to two agents are answered by their own personas and keep separate
// histories; moving #general from main to scribe (a config change and a
// restart) is announced there once, in the transcript, and main's history
// of #general stays main's.
func TestRoutesE2ETwoChannelsTwoAgents(t *testing.T) {
	t.Parallel()
	h := startBot(t, personaModel{}, func(c *config.Config) {
		c.Agents[0].SystemPrompt = "I am Main."
		c.Agents = append(c.Agents, config.AgentConfig{ID: "scribe", Name: "Scribe", SystemPrompt: "I am Scribe.", Model: c.Agents[0].Model})
	})
	review, err := h.emu.AddTextChannel(h.guild.ID, "review")
	if err != nil {
		t.Fatal(err)
	}
	general := h.general.ID
	msgs := rtSay(t, h, general, "first", 2)
	if !strings.HasPrefix(msgs[1].Content, "I am Main. | ") {
		t.Fatalf("#general answered by %q, want main", msgs[1].Content)
	}

	// The config now routes #general to scribe; #review stays main's.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.cfg.Agents[1].Channels = []string{general}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	msgs = rtSay(t, h, general, "second", 5)
	notice, reply := msgs[3], msgs[4]
	if notice.Content != "🔀 Scribe answers in this conversation now, instead of Assistant; each keeps its own history here." {
		t.Fatalf("route change shown as %q", notice.Content)
	}
	if !strings.HasPrefix(reply.Content, "I am Scribe. | ") {
		t.Fatalf("#general answered by %q after the change, want scribe", reply.Content)
	}
	msgs = rtSay(t, h, general, "third", 7)
	if n := countContaining(msgs, "🔀"); n != 1 {
		t.Fatalf("#general shows the route change %d times, want once", n)
	}
	if !strings.HasPrefix(msgs[6].Content, "I am Scribe. | ") {
		t.Fatalf("third answered by %q", msgs[6].Content)
	}
	rmsgs := rtSay(t, h, review.ID, "elsewhere", 2)
	if !strings.HasPrefix(rmsgs[1].Content, "I am Main. | ") || countContaining(rmsgs, "🔀") != 0 {
		t.Fatalf("#review shows %q, want main's answer and no route notice", rmsgs[1].Content)
	}

	st := finishBot(t, h, general, review.ID)
	sources := func(key string) []string {
		var out []string
		for _, e := range seEntries(t, st, key) {
			out = append(out, string(e.Source)+"|"+e.Text)
		}
		return out
	}
	mainGeneral := sources("agent:main:discord:channel:" + general)
	if len(mainGeneral) != 2 || !strings.Contains(mainGeneral[0], "first") {
		t.Fatalf("main's #general history = %q, want only the first exchange", mainGeneral)
	}
	scribeGeneral := sources("agent:scribe:discord:channel:" + general)
	if len(scribeGeneral) != 5 || !strings.HasPrefix(scribeGeneral[1], string(transcript.SourceNotice)+"|🔀 Scribe") {
		t.Fatalf("scribe's #general history = %q, want second, the notice, its reply, third, its reply", scribeGeneral)
	}
	if got := sources("agent:main:discord:channel:" + review.ID); len(got) != 2 {
		t.Fatalf("main's #review history = %q", got)
	}
}

// TestRoutesE2ECategoryThreadAndMove: an agent claiming a category answers
// in its channels and their threads (a thread follows its parent), read
// from the gateway's cache; a moderator moving the channel out of the
// category (CHANNEL_UPDATE) routes it back to the default agent, which
// says so there once.
func TestRoutesE2ECategoryThreadAndMove(t *testing.T) {
	t.Parallel()
	h := startBot(t, personaModel{}, func(c *config.Config) {
		c.Agents[0].SystemPrompt = "I am Main."
		c.Agents = append(c.Agents, config.AgentConfig{ID: "scribe", Name: "Scribe", SystemPrompt: "I am Scribe.", Model: c.Agents[0].Model})
	})
	cat, err := h.emu.AddCategory(h.guild.ID, "meetings")
	if err != nil {
		t.Fatal(err)
	}
	minutes, err := h.emu.AddTextChannel(h.guild.ID, "minutes")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.emu.MoveChannel(minutes.ID, cat.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.cfg.Agents[1].Channels = []string{cat.ID}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if msgs := rtSay(t, h, minutes.ID, "in the category", 2); !strings.HasPrefix(msgs[1].Content, "I am Scribe. | ") {
		t.Fatalf("#minutes answered by %q, want scribe (its category)", msgs[1].Content)
	}
	if msgs := rtSay(t, h, h.general.ID, "outside", 2); !strings.HasPrefix(msgs[1].Content, "I am Main. | ") {
		t.Fatalf("#general answered by %q, want main", msgs[1].Content)
	}
	th, err := h.emu.AddThread(minutes.ID, "notes", h.alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := rtSay(t, h, th.ID, "in a thread", 2); !strings.HasPrefix(msgs[1].Content, "I am Scribe. | ") {
		t.Fatalf("thread of #minutes answered by %q, want scribe (it follows its parent)", msgs[1].Content)
	}
	// A reply's entry is written once its send is confirmed, into the
	// session the conversation routes to then: wait for scribe's before
	// the route changes under them.
	threadKey := "agent:scribe:discord:channel:" + th.ID
	for _, key := range []string{threadKey, "agent:scribe:discord:channel:" + minutes.ID} {
		waitFor(t, "the reply in "+key, func() bool {
			es, err := h.app.transcripts.Entries(t.Context(), key, 0, 0)
			return err == nil && len(es) == 2
		})
	}
	if err := h.emu.MoveChannel(minutes.ID, ""); err != nil {
		t.Fatal(err)
	}
	msgs := rtSay(t, h, minutes.ID, "moved out", 5)
	if msgs[3].Content != "🔀 Assistant answers in this conversation now, instead of Scribe; each keeps its own history here." || !strings.HasPrefix(msgs[4].Content, "I am Main. | ") {
		t.Fatalf("#minutes after the move shows %q", contents(msgs[2:]))
	}
	st := finishBot(t, h, h.general.ID, minutes.ID, th.ID)
	if es := seEntries(t, st, threadKey); len(es) != 2 {
		t.Fatalf("the thread's history is not scribe's: %+v", es)
	}
}

// TestMatrixE2ERoomRoutedToAgent: on Matrix a room id in agents[].channels
// routes the room to that agent: its answer and `!agents` are in the
// agent's own session of the room, and `!agents` says why.
func TestMatrixE2ERoomRoutedToAgent(t *testing.T) {
	w := newMxWorld(t) // not parallel: one homeserver at a time beside the parallel suite
	h := startMatrixBot(t, w, func(c *config.Config) {
		c.Agents = append(c.Agents, config.AgentConfig{ID: "scribe", Name: "Scribe", SystemPrompt: "I am Scribe.", Model: c.Agents[0].Model,
			Channels: []string{w.room}})
	})
	w.say(t, w.room, "", "bot: minutes please", true)
	waitFor(t, "the answer in the room", func() bool { return len(w.botReplies(t, w.room, w.room)) == 1 })
	w.command(t, w.room, "!agents", "answers here: agent `scribe`, because this conversation ("+w.room+") is in its channels")
	key := "agent:scribe:matrix:channel:" + w.room
	var es []transcript.Entry
	waitFor(t, "the room's entries in scribe's session", func() bool {
		var err error
		es, err = h.app.transcripts.Entries(t.Context(), key, 0, 0)
		return err == nil && len(es) >= 3
	})
	// The question, its answer, and !agents' public reply (a command is
	// handled, not routed: it is no entry).
	var got []string
	for _, e := range es {
		got = append(got, string(e.Source))
	}
	if want := []string{"user", "turn", "command"}; !slices.Equal(got, want) {
		t.Fatalf("scribe's session of the room holds %q, want %q", got, want)
	}
	finishMatrixBot(t, h, w, []string{w.room})
}
