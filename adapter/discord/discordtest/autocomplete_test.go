package discordtest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// TestAutocomplete: the emulator sends an autocomplete interaction (type
// 4) only for an option registered with autocomplete, with one focused
// option, and takes only a type 8 result within 3 s, with at most 25
// choices of 1-100 character names and values of at most 100 characters;
// nothing is displayed, and no follow-up or @original edit exists for it.
func TestAutocomplete(t *testing.T) {
	t.Parallel()
	clk := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFixture(t, discordtest.Options{Now: clk.Now})
	s := restSession(t, f.e)
	id := &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: "id", Description: "job", Required: true, Autocomplete: true}
	plain := &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: "note", Description: "n"}
	_, err := s.ApplicationCommandBulkOverwrite(f.e.ApplicationID(), f.guild.ID, []*discordgo.ApplicationCommand{
		{Name: "cron", Description: "jobs", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "remove", Description: "r", Options: []*discordgo.ApplicationCommandOption{id, plain}},
		}},
		{Name: "ping", Description: "p"},
	})
	must(t, err)

	// Registration: autocomplete with choices, or on a boolean, is refused.
	for name, o := range map[string]*discordgo.ApplicationCommandOption{
		"with choices": {Type: discordgo.ApplicationCommandOptionString, Name: "x", Description: "x", Autocomplete: true,
			Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "a", Value: "a"}}},
		"on a boolean": {Type: discordgo.ApplicationCommandOptionBoolean, Name: "x", Description: "x", Autocomplete: true},
	} {
		_, err := s.ApplicationCommandBulkOverwrite(f.e.ApplicationID(), f.guild.ID, []*discordgo.ApplicationCommand{{Name: "bad", Description: "b", Options: []*discordgo.ApplicationCommandOption{o}}})
		if status, _ := restCode(t, err); status != http.StatusBadRequest {
			t.Errorf("registering autocomplete %s: status %d, want 400", name, status)
		}
	}

	sub := func(opts ...discordtest.CommandOption) discordtest.CommandOption {
		return discordtest.CommandOption{Name: "remove", Value: opts}
	}
	if _, err := f.e.InvokeAutocomplete(f.ch.ID, f.alice.ID, "cron", sub(discordtest.CommandOption{Name: "note", Value: "x", Focused: true})); err == nil {
		t.Fatal("autocomplete sent for an option registered without it")
	}
	if _, err := f.e.InvokeAutocomplete(f.ch.ID, f.alice.ID, "cron", sub(discordtest.CommandOption{Name: "id", Value: "x"})); err == nil {
		t.Fatal("autocomplete sent with no focused option")
	}
	invoke := func() *discordgo.Interaction {
		in, err := f.e.InvokeAutocomplete(f.ch.ID, f.alice.ID, "cron", sub(discordtest.CommandOption{Name: "id", Value: "da", Focused: true}))
		must(t, err)
		return &discordgo.Interaction{ID: in.ID, Token: in.Token, AppID: f.e.ApplicationID()}
	}
	result := func(choices ...*discordgo.ApplicationCommandOptionChoice) *discordgo.InteractionResponse {
		return &discordgo.InteractionResponse{Type: discordgo.InteractionApplicationCommandAutocompleteResult, Data: &discordgo.InteractionResponseData{Choices: choices}}
	}
	choice := func(name string, value any) *discordgo.ApplicationCommandOptionChoice {
		return &discordgo.ApplicationCommandOptionChoice{Name: name, Value: value}
	}
	many := make([]*discordgo.ApplicationCommandOptionChoice, 26)
	for i := range many {
		many[i] = choice(fmt.Sprint("job ", i), fmt.Sprint(i))
	}
	for name, resp := range map[string]*discordgo.InteractionResponse{
		"a message instead of a result": {Type: discordgo.InteractionResponseChannelMessageWithSource, Data: &discordgo.InteractionResponseData{Content: "hi", AllowedMentions: quiet()}},
		"26 choices":                    result(many...),
		"an empty name":                 result(choice("", "a")),
		"a 101-character name":          result(choice(strings.Repeat("n", 101), "a")),
		"a 101-character value":         result(choice("n", strings.Repeat("v", 101))),
	} {
		if status, _ := restCode(t, s.InteractionRespond(invoke(), resp)); status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, status)
		}
	}

	late := invoke()
	clk.Advance(3*time.Second + time.Millisecond)
	if status, code := restCode(t, s.InteractionRespond(late, result(choice("daily", "j1")))); status != http.StatusNotFound || code != 10062 {
		t.Fatalf("late result = %d/%d, want 404/10062", status, code)
	}

	in := invoke()
	must(t, s.InteractionRespond(in, result(choice("daily report (j1)", "j1"), choice(strings.Repeat("n", 100), strings.Repeat("v", 100)))))
	got, ok := f.e.Interaction(in.ID)
	if !ok || len(got.Responses) != 1 || got.Responses[0].Type != 8 || len(got.Responses[0].Choices) != 2 || got.Responses[0].Choices[0].Value != "j1" {
		t.Fatalf("recorded %+v", got.Responses)
	}
	if n := len(f.e.Messages(f.ch.ID)); n != 0 {
		t.Fatalf("an autocomplete result displayed %d messages", n)
	}
	if _, err := s.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "more", AllowedMentions: quiet()}); err == nil {
		t.Fatal("a follow-up of an autocomplete interaction was accepted")
	}
	// A result answers only an autocomplete interaction.
	cmd, err := f.e.InvokeCommand(f.ch.ID, f.alice.ID, "ping")
	must(t, err)
	if status, _ := restCode(t, s.InteractionRespond(&discordgo.Interaction{ID: cmd.ID, Token: cmd.Token, AppID: f.e.ApplicationID()}, result(choice("a", "a")))); status != http.StatusBadRequest {
		t.Fatalf("a result to a slash command: status %d, want 400", status)
	}
}
