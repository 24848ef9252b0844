package discordtest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Users invoking the bot's application commands and their autocomplete, as Discord delivers them.

// InvokeCommand has a user run a registered slash command in a channel, emitting INTERACTION_CREATE.
// The bot's callback, follow-ups and original-response edits are recorded on the Interaction
// (see Interaction by id); non-ephemeral ones are also displayed in the channel.
func (e *Emulator) InvokeCommand(channelID, userID, name string, opts ...CommandOption) (Interaction, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	u, err := e.userLocked(userID)
	if err != nil {
		return Interaction{}, err
	}
	ch := e.world.channel(channelID)
	if ch == nil {
		return Interaction{}, fmt.Errorf("discordtest: unknown channel %s", channelID)
	}
	cmd := e.world.commandLocked(ch.GuildID, name)
	if cmd == nil {
		return Interaction{}, fmt.Errorf("discordtest: command %q is not registered", name)
	}
	in := &Interaction{
		ID: e.nextIDLocked(), ChannelID: ch.ID, GuildID: ch.GuildID, User: u, Command: name,
		Options: append([]CommandOption(nil), opts...), Created: e.opts.Now(),
	}
	return e.dispatchInteractionLocked(in, ch, 2, map[string]any{"id": cmd.ID, "name": cmd.Name, "type": cmd.Type, "options": wireOptions(opts)}, nil)
}

// InvokeAutocomplete has a user type into an option of a registered slash
// command, emitting INTERACTION_CREATE of type 4 (APPLICATION_COMMAND_AUTOCOMPLETE)
// as Discord does: exactly one option is Focused (its Value the partial
// text), and Discord sends it only for an option registered with
// "autocomplete": true (an error otherwise). A value in a subcommand is
// a CommandOption whose Value is []CommandOption, as for InvokeCommand.
// The bot's answer is one type 8 callback (at most 25 choices), recorded on
// the Interaction; it displays nothing.
func (e *Emulator) InvokeAutocomplete(channelID, userID, name string, opts ...CommandOption) (Interaction, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	u, err := e.userLocked(userID)
	if err != nil {
		return Interaction{}, err
	}
	ch := e.world.channel(channelID)
	if ch == nil {
		return Interaction{}, fmt.Errorf("discordtest: unknown channel %s", channelID)
	}
	cmd := e.world.commandLocked(ch.GuildID, name)
	if cmd == nil {
		return Interaction{}, fmt.Errorf("discordtest: command %q is not registered", name)
	}
	var registered struct {
		Options []registeredOption `json:"options"`
	}
	_ = json.Unmarshal(cmd.Raw, &registered)
	path, focused := focusedPath(opts, nil)
	if focused != 1 {
		return Interaction{}, fmt.Errorf("discordtest: an autocomplete interaction has exactly one focused option, got %d", focused)
	}
	if o := findOption(registered.Options, path); o == nil || !o.Autocomplete {
		return Interaction{}, fmt.Errorf("discordtest: option %s of /%s is not registered with autocomplete: true, so Discord sends no autocomplete for it", strings.Join(path, " "), name)
	}
	in := &Interaction{
		ID: e.nextIDLocked(), ChannelID: ch.ID, GuildID: ch.GuildID, User: u, Command: name,
		Options: append([]CommandOption(nil), opts...), Created: e.opts.Now(), Autocomplete: true,
	}
	return e.dispatchInteractionLocked(in, ch, 4, map[string]any{"id": cmd.ID, "name": cmd.Name, "type": cmd.Type, "options": wireOptions(opts)}, nil)
}

// registeredOption is an option of a registered command, as the bot sent it.
type registeredOption struct {
	Name         string             `json:"name"`
	Type         int                `json:"type"`
	Autocomplete bool               `json:"autocomplete"`
	Options      []registeredOption `json:"options"`
}

// focusedPath is the names leading to the focused option (through
// subcommands) and how many options are focused.
func focusedPath(opts []CommandOption, prefix []string) ([]string, int) {
	var path []string
	n := 0
	for _, o := range opts {
		p := append(append([]string(nil), prefix...), o.Name)
		if sub, ok := o.Value.([]CommandOption); ok {
			sp, sn := focusedPath(sub, p)
			if sn > 0 {
				path = sp
			}
			n += sn
			continue
		}
		if o.Focused {
			path = p
			n++
		}
	}
	return path, n
}

func findOption(opts []registeredOption, path []string) *registeredOption {
	for i := range opts {
		if len(path) > 0 && opts[i].Name == path[0] {
			if len(path) == 1 {
				return &opts[i]
			}
			return findOption(opts[i].Options, path[1:])
		}
	}
	return nil
}

// commandLocked finds a registered command by name: the guild's first,
// then the global ones.
func (w *world) commandLocked(guildID, name string) *Command {
	for _, scope := range []string{guildID, ""} {
		for i, c := range w.commands[scope] {
			if c.Name == name {
				return &w.commands[scope][i]
			}
		}
		if scope == "" {
			break
		}
	}
	return nil
}

// dispatchInteractionLocked registers in (its token lives 15 minutes) and
// emits INTERACTION_CREATE of type typ with data, in ch, from in.User (a
// guild member, with their permissions there, or a DM user); msg is the
// message a component belongs to.
func (e *Emulator) dispatchInteractionLocked(in *Interaction, ch *Channel, typ int, data map[string]any, msg *Message) (Interaction, error) {
	u := in.User
	if ch.GuildID != "" && !e.world.isMember(ch.GuildID, u.ID) {
		return Interaction{}, fmt.Errorf("discordtest: %s is not a member of guild %s", u.ID, ch.GuildID)
	}
	in.Token = "itok-" + in.ID
	e.world.interactions[in.Token] = in
	e.world.interByID[in.ID] = in
	d := map[string]any{
		"id": in.ID, "application_id": e.appID, "type": typ, "token": in.Token, "version": 1,
		"channel_id": ch.ID, "locale": "en-US", "app_permissions": itoa(^e.world.botDenied(ch) & allPerms),
		"data": data, "channel": ch.wire(&e.world),
	}
	if msg != nil {
		d["message"] = msg.wire()
	}
	if ch.GuildID != "" {
		d["guild_id"] = ch.GuildID
		d["guild_locale"] = "en-US"
		mem := e.memberWireLocked(ch.GuildID, u.ID, true)
		mem["permissions"] = itoa(e.world.permissions(u.ID, ch))
		d["member"] = mem
	} else {
		d["user"] = u.wire()
	}
	e.dispatchLocked("INTERACTION_CREATE", d)
	return cloneInteraction(in), nil
}

// allPerms is every permission bit the emulator models (discordgo.PermissionAll).
const allPerms = int64(1<<51 - 1)

// wireOptions renders command options; a value of type []CommandOption is
// a subcommand holding those options.
func wireOptions(opts []CommandOption) []any {
	out := []any{}
	for _, o := range opts {
		if sub, ok := o.Value.([]CommandOption); ok {
			out = append(out, map[string]any{"name": o.Name, "type": 1, "options": wireOptions(sub)})
			continue
		}
		w := map[string]any{"name": o.Name, "type": optionType(o.Value), "value": o.Value}
		if o.Focused {
			w["focused"] = true
		}
		out = append(out, w)
	}
	return out
}

func optionType(v any) int {
	switch v.(type) {
	case bool:
		return 5
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return 4
	case float32, float64:
		return 10
	default:
		return 3
	}
}

func cloneInteraction(in *Interaction) Interaction {
	c := *in
	c.Options = append([]CommandOption(nil), in.Options...)
	c.Responses = append([]InteractionResponse(nil), in.Responses...)
	return c
}

// ---- moderating threads ----
