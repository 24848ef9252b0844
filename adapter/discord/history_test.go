package discord

import (
	"context"
	"fmt"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/audit"
)

var noPings = &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}

// TestHistoryRead: the audit's reader shows a channel as Discord does -
// oldest first, back to the oldest message asked for, across pages - and
// tells the bot's messages (its own, its personas' webhooks) from another
// integration's webhook, and addressed user messages from chatter.
func TestHistoryRead(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	g := e.AddGuild("lab")
	ch, err := e.AddTextChannel(g.ID, "general")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := e.AddMember(g.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	say := func(text string) {
		m, err := e.UserSay(ch.ID, alice.ID, text)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	for i := range 120 {
		say(fmt.Sprintf("chatter %d", i))
	}
	say("<@" + e.BotUserID() + "> hello")
	say("<@" + e.BotUserID() + ">") // a bare mention reaches no session
	mine, err := s.WebhookCreate(ch.ID, "persona", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, send := range []func() (*discordgo.Message, error){
		func() (*discordgo.Message, error) {
			return s.ChannelMessageSendComplex(ch.ID, &discordgo.MessageSend{Content: "from the bot", AllowedMentions: noPings})
		},
		func() (*discordgo.Message, error) {
			return s.WebhookExecute(mine.ID, mine.Token, true, &discordgo.WebhookParams{Content: "from a persona", AllowedMentions: noPings})
		},
	} {
		m, err := send()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	other, err := e.AddWebhook(ch.ID, "github")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.WebhookExecute(other.ID, other.Token, true, &discordgo.WebhookParams{Content: "a push", AllowedMentions: noPings})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, m.ID)

	h, err := NewHistory(HistoryOptions{Token: e.Token(), APIURL: e.URL()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Read(context.Background(), audit.Target{Platform: "discord", ID: ch.ID}, ids[10], 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids)-10 || got[0].ID != ids[10] || got[len(got)-1].ID != ids[len(ids)-1] {
		t.Fatalf("read %d messages from %s to %s, want %d from %s on", len(got), got[0].ID, got[len(got)-1].ID, len(ids)-10, ids[10])
	}
	n := len(got)
	want := []struct {
		text               string
		fromBot, addressed bool
	}{
		{"<@" + e.BotUserID() + "> hello", false, true}, {"<@" + e.BotUserID() + ">", false, false},
		{"from the bot", true, false}, {"from a persona", true, false}, {"a push", false, false},
	}
	for i, w := range want {
		g := got[n-len(want)+i]
		if g.Text != w.text || g.FromBot != w.fromBot || g.Addressed != w.addressed || g.Conversation != ch.ID {
			t.Errorf("message %d = %+v, want %+v", i, g, w)
		}
	}
	if got[0].Author != "alice" || got[0].At.IsZero() || got[0].Addressed {
		t.Errorf("chatter = %+v", got[0])
	}
	// A limit reads the newest messages only.
	if got, err := h.Read(context.Background(), audit.Target{Platform: "discord", ID: ch.ID}, ids[0], 30); err != nil || len(got) != 30 || got[29].ID != ids[len(ids)-1] {
		t.Fatalf("limited read: %d messages, %v", len(got), err)
	}
}
