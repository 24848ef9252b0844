package discord

import (
	"context"
	"fmt"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/command"
)

// completeWithin bounds the work of one autocomplete answer: Discord
// forgets an interaction not answered within 3 s (invariant 15), and an
// autocomplete cannot be deferred. Suggestions whose authority check did
// not finish in time are left out (a failed lookup refuses).
const completeWithin = 2 * time.Second

// withAutocomplete marks the options the core completes (command.Completable)
// with autocomplete: true, where Discord sends autocomplete interactions.
func withAutocomplete(cmds []*discordgo.ApplicationCommand) []*discordgo.ApplicationCommand {
	for _, c := range cmds {
		for _, o := range c.Options {
			if o.Type == discordgo.ApplicationCommandOptionSubCommand {
				for _, so := range o.Options {
					so.Autocomplete = command.Completes(c.Name, o.Name, so.Name)
				}
				continue
			}
			o.Autocomplete = command.Completes(c.Name, "", o.Name)
		}
	}
	return cmds
}

// focused is the option an autocomplete interaction is for, and what the
// user typed in it so far.
func focused(in *discordgo.Interaction) (name, typed string, ok bool) {
	options := in.ApplicationCommandData().Options
	if len(options) == 1 && options[0] != nil && options[0].Type == discordgo.ApplicationCommandOptionSubCommand {
		options = options[0].Options
	}
	for _, o := range options {
		if o != nil && o.Focused {
			return o.Name, fmt.Sprint(o.Value), true
		}
	}
	return "", "", false
}

// onAutocomplete answers an autocomplete interaction (type 4) with the
// core's suggestions (type 8): filtered by the command's own authority,
// at most 25, within completeWithin.
func (g *Gateway) onAutocomplete(ctx context.Context, in *discordgo.Interaction) {
	choices := []autocompleteChoice{}
	if option, typed, ok := focused(in); ok && g.d.Commands != nil {
		v := parseInvocation(in)
		v.conv = g.conversationOf(in.GuildID, in.ChannelID, v.userID)
		if in.Member != nil {
			g.c.noteMember(g.c.session(), in.GuildID, in.Member, in.Member.User) // fresh roles for the authority
		}
		cctx, cancel := context.WithTimeout(ctx, completeWithin)
		for _, c := range g.d.Commands.Complete(cctx, g.coreInvocation(v), option, typed) {
			choices = append(choices, autocompleteChoice{Name: c.Name, Value: c.Value})
		}
		cancel()
	}
	// Sent by hand: discordgo omits an empty choices list, which Discord
	// requires (no suggestion is "choices": []).
	body := autocompleteResult{Type: discordgo.InteractionApplicationCommandAutocompleteResult}
	body.Data.Choices = choices
	endpoint := discordgo.EndpointInteractionResponse(in.ID, in.Token)
	_, err := g.c.session().RequestWithBucketID("POST", endpoint, body, endpoint, discordgo.WithContext(ctx))
	if err != nil {
		g.c.countError(err)
		g.log.Warn().Err(restError(err)).Str("command", in.ApplicationCommandData().Name).Msg("autocomplete answer failed")
	}
}

// autocompleteResult is the type 8 callback body.
type autocompleteResult struct {
	Type discordgo.InteractionResponseType `json:"type"`
	Data struct {
		Choices []autocompleteChoice `json:"choices"`
	} `json:"data"`
}

type autocompleteChoice struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}
