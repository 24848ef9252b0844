package discordtest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

func (e *Emulator) getCommands(c *call) reply {
	if c.p["application_id"] != e.appID {
		return fail(403, 50001, "Missing Access")
	}
	out := []any{}
	for _, cmd := range e.world.commands[c.p["guild_id"]] {
		out = append(out, cmd.wire(e.appID))
	}
	return ok(out)
}

func (cmd Command) wire(appID string) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(cmd.Raw, &m)
	m["id"] = cmd.ID
	m["application_id"] = appID
	m["version"] = cmd.ID
	m["type"] = cmd.Type
	if cmd.GuildID != "" {
		m["guild_id"] = cmd.GuildID
	}
	return m
}

func (e *Emulator) putCommands(c *call) reply {
	if c.p["application_id"] != e.appID {
		return fail(403, 50001, "Missing Access")
	}
	guildID := c.p["guild_id"]
	if guildID != "" && e.world.guilds[guildID] == nil {
		return errUnknownGuild()
	}
	var raws []json.RawMessage
	if r := c.decode(&raws); r.status != 0 {
		return r
	}
	old := map[string]string{}
	for _, cmd := range e.world.commands[guildID] {
		old[cmd.Name] = cmd.ID
	}
	cmds := []Command{}
	for i, raw := range raws {
		var b struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Type        int    `json:"type"`
		}
		if json.Unmarshal(raw, &b) != nil || b.Name == "" || len(b.Name) > 32 {
			return formError(strconv.Itoa(i), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
		}
		if b.Type == 0 {
			b.Type = 1
		}
		var opts struct {
			Options []json.RawMessage `json:"options"`
		}
		_ = json.Unmarshal(raw, &opts)
		if r := validateAutocomplete(strconv.Itoa(i)+".options", opts.Options); r.status != 0 {
			return r
		}
		id := old[b.Name]
		if id == "" {
			id = e.nextIDLocked()
		}
		cmds = append(cmds, Command{ID: id, GuildID: guildID, Name: b.Name, Description: b.Description, Type: b.Type, Raw: raw})
	}
	e.world.commands[guildID] = cmds
	out := []any{}
	for _, cmd := range cmds {
		out = append(out, cmd.wire(e.appID))
	}
	return ok(out)
}

func (e *Emulator) interactionCallback(c *call) reply {
	in := e.world.interByID[c.p["interaction_id"]]
	if in == nil || in.Token != c.p["interaction_token"] {
		return errUnknownInteraction()
	}
	if in.acked {
		return errAlreadyAcked()
	}
	if e.opts.Now().Sub(in.Created) > e.opts.InteractionDeadline {
		// Discord forgets an interaction nobody answered within 3 s.
		return errUnknownInteraction()
	}
	var b msgBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	data := b.Data
	if data == nil {
		data = &msgBody{}
	}
	flags := 0
	if data.Flags != nil {
		flags = *data.Flags
	}
	resp := InteractionResponse{Kind: "callback", Type: b.Type, Content: data.content(), Flags: flags, Ephemeral: flags&FlagEphemeral != 0, Raw: c.body}
	if in.Autocomplete != (b.Type == 8) {
		// An autocomplete interaction takes only its result (8), and a
		// result answers nothing else.
		return formError("type", "INTERACTION_RESPONSE_TYPE_INVALID", "Interaction response type is invalid for this interaction type")
	}
	switch b.Type {
	case 8:
		choices, r := validateChoices(data)
		if r.status != 0 {
			return r
		}
		resp.Choices = choices
		in.acked = true
		in.Responses = append(in.Responses, resp)
		e.broadcastLocked()
		return noContent()
	case 4:
		if r := e.mentionsLocked(c, data.AllowedMentions); r.status != 0 {
			return r
		}
		if r := validateContent(data); r.status != 0 {
			return r
		}
	case 5:
	case 6, 7:
		// DEFERRED_UPDATE_MESSAGE and UPDATE_MESSAGE exist only for a
		// component's interaction (a click on a message).
		if in.CustomID == "" {
			return formError("type", "INTERACTION_RESPONSE_TYPE_INVALID", "This response type is only valid for message component interactions")
		}
		if b.Type == 7 {
			return formError("type", "EMULATOR_UNSUPPORTED", "the emulator does not model UPDATE_MESSAGE (7); edit the message instead")
		}
		in.acked = true
		in.Responses = append(in.Responses, resp)
		e.broadcastLocked()
		return noContent()
	default:
		// PONG, modals: recorded, nothing displayed.
		in.acked = true
		in.Responses = append(in.Responses, resp)
		e.broadcastLocked()
		return noContent()
	}
	in.acked = true
	in.ephemeral = resp.Ephemeral
	if !resp.Ephemeral {
		ch := e.world.channel(in.ChannelID)
		if ch == nil {
			return errUnknownChannel()
		}
		m := &Message{
			Content: data.content(), Author: e.botUser, WebhookID: e.appID, Embeds: data.Embeds,
			AllowedMentions: data.AllowedMentions, Type: MessageTypeSlashReply, Flags: flags, InteractionID: in.ID,
		}
		if b.Type == 5 {
			m.Flags |= FlagLoading
		}
		e.postLocked(ch, m)
		in.OriginalID = m.ID
		resp.MessageID = m.ID
	}
	in.Responses = append(in.Responses, resp)
	e.broadcastLocked()
	return noContent()
}

// tokenExpiredLocked reports whether an interaction token outlived its 15 minutes.
func (e *Emulator) tokenExpiredLocked(in *Interaction) bool {
	return e.opts.Now().Sub(in.Created) > e.opts.InteractionTokenTTL
}

func (e *Emulator) followup(c *call) reply {
	in := e.world.interactions[c.p["webhook_token"]]
	if in == nil || !in.acked || in.Autocomplete {
		return errUnknownWebhook()
	}
	if e.tokenExpiredLocked(in) {
		return errInvalidWebhookTok()
	}
	var b msgBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := e.mentionsLocked(c, b.AllowedMentions); r.status != 0 {
		return r
	}
	if r := validateContent(&b); r.status != 0 {
		return r
	}
	flags := 0
	if b.Flags != nil {
		flags = *b.Flags
	}
	resp := InteractionResponse{Kind: "followup", Content: b.content(), Flags: flags, Ephemeral: flags&FlagEphemeral != 0, Raw: c.body}
	m := &Message{
		Content: b.content(), Author: e.botUser, WebhookID: e.appID, Embeds: b.Embeds, AllowedMentions: b.AllowedMentions,
		Type: MessageTypeSlashReply, Flags: flags, InteractionID: in.ID,
	}
	if resp.Ephemeral {
		// Not displayed: give it an id so the response decodes, but keep it out of the channel.
		m.ID = e.nextIDLocked()
		m.ChannelID, m.GuildID, m.Timestamp = in.ChannelID, in.GuildID, e.opts.Now()
	} else {
		ch := e.world.channel(in.ChannelID)
		if ch == nil {
			return errUnknownChannel()
		}
		e.postLocked(ch, m)
		resp.MessageID = m.ID
	}
	in.Responses = append(in.Responses, resp)
	e.broadcastLocked()
	if c.q.Get("wait") == "false" {
		return noContent()
	}
	return ok(m.wire())
}

// Autocomplete limits (Discord: "Autocomplete" in the interactions docs).
const (
	MaxChoices         = 25
	MaxChoiceNameLen   = 100
	MaxChoiceStringLen = 100
)

// validateChoices checks an autocomplete result's data.choices as Discord
// does: present, at most 25, each a name of 1-100 characters and a value
// of the option's kind, a string of at most 100 characters or a number.
func validateChoices(data *msgBody) ([]Choice, reply) {
	if data.Choices == nil {
		return nil, formError("data.choices", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if len(*data.Choices) > MaxChoices {
		return nil, formError("data.choices", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxChoices))
	}
	out := make([]Choice, 0, len(*data.Choices))
	for i, raw := range *data.Choices {
		var ch Choice
		if json.Unmarshal(raw, &ch) != nil {
			return nil, formError(fmt.Sprintf("data.choices.%d", i), "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
		}
		if n := utf8.RuneCountInString(ch.Name); n < 1 || n > MaxChoiceNameLen {
			return nil, formError(fmt.Sprintf("data.choices.%d.name", i), "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", MaxChoiceNameLen))
		}
		switch v := ch.Value.(type) {
		case string:
			if utf8.RuneCountInString(v) > MaxChoiceStringLen {
				return nil, formError(fmt.Sprintf("data.choices.%d.value", i), "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxChoiceStringLen))
			}
		case float64:
		default:
			return nil, formError(fmt.Sprintf("data.choices.%d.value", i), "BASE_TYPE_REQUIRED", "This field is required")
		}
		out = append(out, ch)
	}
	return out, reply{}
}

// validateAutocomplete applies Discord's rules to registered options:
// autocomplete only on a string, integer or number option, and never
// together with fixed choices.
func validateAutocomplete(field string, raws []json.RawMessage) reply {
	for i, raw := range raws {
		var o struct {
			Type         int               `json:"type"`
			Autocomplete bool              `json:"autocomplete"`
			Choices      []json.RawMessage `json:"choices"`
			Options      []json.RawMessage `json:"options"`
		}
		if json.Unmarshal(raw, &o) != nil {
			continue
		}
		f := fmt.Sprintf("%s.%d", field, i)
		if o.Autocomplete && o.Type != 3 && o.Type != 4 && o.Type != 10 {
			return formError(f+".autocomplete", "APPLICATION_COMMAND_OPTION_INVALID", "Autocomplete can only be enabled for string, integer or number options")
		}
		if o.Autocomplete && len(o.Choices) > 0 {
			return formError(f+".autocomplete", "APPLICATION_COMMAND_AUTOCOMPLETE_INVALID", "Autocomplete cannot be set if choices are present")
		}
		if r := validateAutocomplete(f+".options", o.Options); r.status != 0 {
			return r
		}
	}
	return reply{}
}
