package discordtest_test

import (
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

func buttonRow(bs ...discordgo.Button) []discordgo.MessageComponent {
	cs := make([]discordgo.MessageComponent, len(bs))
	for i := range bs {
		cs[i] = bs[i]
	}
	return []discordgo.MessageComponent{discordgo.ActionsRow{Components: cs}}
}

// Buttons are validated like Discord does, kept on the message, replaced
// by an edit, and a click reaches the bot as a component interaction.
func TestButtonsAndClicks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	clicks := make(chan *discordgo.InteractionCreate, 1)
	s := openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(_ *discordgo.Session, ic *discordgo.InteractionCreate) { clicks <- ic })
	})
	bad := []struct {
		name string
		c    []discordgo.MessageComponent
		want string
	}{
		{"no custom id", buttonRow(discordgo.Button{Label: "x", Style: discordgo.PrimaryButton}), "custom_id"},
		{"long label", buttonRow(discordgo.Button{Label: strings.Repeat("l", 81), Style: discordgo.PrimaryButton, CustomID: "a"}), "label"},
		{"duplicate id", buttonRow(discordgo.Button{Label: "a", Style: 1, CustomID: "a"}, discordgo.Button{Label: "b", Style: 1, CustomID: "a"}), "COMPONENT_CUSTOM_ID_DUPLICATED"},
		{"six in a row", buttonRow(discordgo.Button{Label: "1", Style: 1, CustomID: "1"}, discordgo.Button{Label: "2", Style: 1, CustomID: "2"},
			discordgo.Button{Label: "3", Style: 1, CustomID: "3"}, discordgo.Button{Label: "4", Style: 1, CustomID: "4"},
			discordgo.Button{Label: "5", Style: 1, CustomID: "5"}, discordgo.Button{Label: "6", Style: 1, CustomID: "6"}), "components.0.components"},
	}
	for _, b := range bad {
		_, err := s.ChannelMessageSendComplex(f.ch.ID, &discordgo.MessageSend{Content: "q", Components: b.c, AllowedMentions: quiet()})
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: err %v, want %q", b.name, err, b.want)
		}
	}
	m, err := s.ChannelMessageSendComplex(f.ch.ID, &discordgo.MessageSend{Content: "allow?", AllowedMentions: quiet(),
		Components: buttonRow(discordgo.Button{Label: "Allow", Style: discordgo.SuccessButton, CustomID: "yes"}, discordgo.Button{Label: "Reject", Style: discordgo.DangerButton, CustomID: "no"})})
	must(t, err)
	shown, _ := f.e.Message(m.ID)
	if bs := shown.Buttons(); len(bs) != 2 || bs[0].Label != "Allow" || bs[1].CustomID != "no" {
		t.Fatalf("buttons %+v", bs)
	}
	if _, err := f.e.ClickButton(m.ID, f.alice.ID, "maybe"); err == nil {
		t.Error("clicked a button the message does not have")
	}
	in, err := f.e.ClickButton(m.ID, f.alice.ID, "yes")
	must(t, err)
	ic := <-clicks
	if ic.Type != discordgo.InteractionMessageComponent || ic.MessageComponentData().CustomID != "yes" || ic.Member.User.ID != f.alice.ID || ic.Message.ID != m.ID {
		t.Fatalf("click = %+v", ic.Interaction)
	}
	must(t, s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}))
	got, err := f.e.WaitResponses(ctxT(t), in.ID, 1)
	must(t, err)
	if got.Responses[0].Type != 6 {
		t.Errorf("response %+v", got.Responses[0])
	}
	// A component update is no answer to a slash command.
	_, err = s.ApplicationCommandBulkOverwrite(f.e.ApplicationID(), f.guild.ID, []*discordgo.ApplicationCommand{{Name: "ping", Description: "p"}})
	must(t, err)
	cmd, err := f.e.InvokeCommand(f.ch.ID, f.alice.ID, "ping")
	must(t, err)
	ic = <-clicks
	if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}); err == nil {
		t.Error("a deferred update answered a slash command")
	}
	if got, _ := f.e.Interaction(cmd.ID); len(got.Responses) != 0 {
		t.Errorf("responses %+v", got.Responses)
	}
	empty := []discordgo.MessageComponent{}
	text := "allowed"
	_, err = s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: m.ID, Channel: f.ch.ID, Content: &text, Components: &empty, AllowedMentions: quiet()})
	must(t, err)
	shown, _ = f.e.Message(m.ID)
	if shown.Content != "allowed" || len(shown.Buttons()) != 0 {
		t.Fatalf("after edit %q %+v", shown.Content, shown.Buttons())
	}
	if _, err := f.e.ClickButton(m.ID, f.alice.ID, "yes"); err == nil {
		t.Error("clicked a removed button")
	}
}
