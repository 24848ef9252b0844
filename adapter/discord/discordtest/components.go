package discordtest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Button is a button of a displayed message (message components).
type Button struct {
	CustomID string
	Label    string
	Style    int
	Disabled bool
}

// Component limits, as Discord enforces them.
const (
	maxActionRows    = 5
	maxRowButtons    = 5
	maxCustomIDLen   = 100
	maxButtonLabel   = 80
	componentRow     = 1
	componentButton  = 2
	buttonStyleLink  = 5
	buttonStyleFirst = 1
)

// parseComponents validates a message's components (action rows of
// buttons; the emulator models no other kind) as strictly as Discord:
// at most 5 rows of at most 5 buttons, a custom_id of 1..100 characters
// unique in the message, a label of at most 80, a known style.
func parseComponents(raw json.RawMessage) ([][]Button, reply) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, reply{}
	}
	var rows []struct {
		Type       int `json:"type"`
		Components []struct {
			Type     int    `json:"type"`
			CustomID string `json:"custom_id"`
			Label    string `json:"label"`
			Style    int    `json:"style"`
			Disabled bool   `json:"disabled"`
			URL      string `json:"url"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, formError("components", "MODEL_TYPE_CONVERT", "Only iterables may be used in a ListType")
	}
	if len(rows) > maxActionRows {
		return nil, formError("components", "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 0 and %d in length.", maxActionRows))
	}
	seen := map[string]bool{}
	out := make([][]Button, 0, len(rows))
	for i, r := range rows {
		at := "components." + strconv.Itoa(i)
		if r.Type != componentRow {
			return nil, formError(at+".type", "COMPONENT_LAYOUT_INVALID", "A top-level component must be an action row")
		}
		if len(r.Components) == 0 || len(r.Components) > maxRowButtons {
			return nil, formError(at+".components", "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", maxRowButtons))
		}
		var row []Button
		for j, c := range r.Components {
			cat := at + ".components." + strconv.Itoa(j)
			switch {
			case c.Type != componentButton:
				return nil, formError(cat+".type", "COMPONENT_TYPE_INVALID", "The emulator models buttons only")
			case c.Style < buttonStyleFirst || c.Style > buttonStyleLink:
				return nil, formError(cat+".style", "BASE_TYPE_CHOICES", "Value must be one of (1, 2, 3, 4, 5).")
			case c.Style == buttonStyleLink:
				return nil, formError(cat+".style", "COMPONENT_TYPE_INVALID", "The emulator models interactive buttons only")
			case c.CustomID == "" || utf8.RuneCountInString(c.CustomID) > maxCustomIDLen:
				return nil, formError(cat+".custom_id", "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", maxCustomIDLen))
			case seen[c.CustomID]:
				return nil, formError(cat+".custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
			case c.Label == "" || utf8.RuneCountInString(c.Label) > maxButtonLabel:
				return nil, formError(cat+".label", "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", maxButtonLabel))
			}
			seen[c.CustomID] = true
			row = append(row, Button{CustomID: c.CustomID, Label: c.Label, Style: c.Style, Disabled: c.Disabled})
		}
		out = append(out, row)
	}
	return out, reply{}
}

func wireComponents(rows [][]Button) []any {
	out := []any{}
	for _, r := range rows {
		cs := []any{}
		for _, b := range r {
			cs = append(cs, map[string]any{"type": componentButton, "custom_id": b.CustomID, "label": b.Label, "style": b.Style, "disabled": b.Disabled})
		}
		out = append(out, map[string]any{"type": componentRow, "components": cs})
	}
	return out
}

// Buttons returns a displayed message's buttons, row by row.
func (m Message) Buttons() []Button {
	var out []Button
	for _, r := range m.Components {
		out = append(out, r...)
	}
	return out
}

// ButtonIDs returns the custom ids of a displayed message's buttons, in order.
func (m Message) ButtonIDs() []string {
	var out []string
	for _, b := range m.Buttons() {
		out = append(out, b.CustomID)
	}
	return out
}

// ClickButton has a user click a button of a displayed message, emitting
// INTERACTION_CREATE (type 3, message component). The bot's callback
// (an ephemeral reply, a deferred update 6, or an update 7) is recorded
// on the Interaction; an update 7 edits the message.
func (e *Emulator) ClickButton(messageID, userID, customID string) (Interaction, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	u, err := e.userLocked(userID)
	if err != nil {
		return Interaction{}, err
	}
	m := e.world.msgByID[messageID]
	if m == nil {
		return Interaction{}, fmt.Errorf("discordtest: unknown message %s", messageID)
	}
	var btn *Button
	for _, r := range m.Components {
		for i := range r {
			if r[i].CustomID == customID {
				btn = &r[i]
			}
		}
	}
	if btn == nil {
		return Interaction{}, fmt.Errorf("discordtest: message %s has no button %q", messageID, customID)
	}
	if btn.Disabled {
		return Interaction{}, fmt.Errorf("discordtest: button %q of message %s is disabled", customID, messageID)
	}
	ch := e.world.channel(m.ChannelID)
	if ch == nil {
		return Interaction{}, fmt.Errorf("discordtest: unknown channel %s", m.ChannelID)
	}
	in := &Interaction{ID: e.nextIDLocked(), ChannelID: ch.ID, GuildID: ch.GuildID, User: u, CustomID: customID, MessageID: m.ID, Created: e.opts.Now()}
	return e.dispatchInteractionLocked(in, ch, 3, map[string]any{"custom_id": customID, "component_type": componentButton}, m)
}
