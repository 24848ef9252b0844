// Package rule1 checks invariant 1 (Rule 1) from outside the bot: what a
// chat displays against every transcript in the store, for the e2e tests,
// the crash tests and `bot demo`.
package rule1

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/audit"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// Store is what the Rule 1 check reads: every transcript.
type Store interface {
	Sessions(ctx context.Context) ([]string, error)
	Range(ctx context.Context, key string, from uint64, limit int) ([]transcript.Entry, error)
}

// located is a transcript entry with its session.
type located struct {
	key string
	e   transcript.Entry
}

// bindingStore is what the routing part of the check reads, when the
// store has it: every binding record, active and ended.
type bindingStore interface {
	Bindings(ctx context.Context) ([]binding.Record, error)
}

// Shown is a message as a chat displays it, for the Rule 1 check.
type Shown struct {
	ID           string
	Conversation string // the conversation id it is displayed in (a channel, a thread, a room), as bindings hold it
	// OwnKey is how the session key of that conversation's own session
	// ends (":channel:<id>"; a Matrix thread's names its room too).
	OwnKey   string
	Content  string
	Order    uint64 // display order within its conversation
	FromBot  bool   // the bot's own, or posted under one of its personas
	OtherBot bool   // another bot's
	DM       bool   // displayed in a direct-message conversation
}

// Display is what a platform displays: the Discord emulator, a Matrix
// homeserver. The Rule 1 check reads every platform through it.
type Display interface {
	Message(id string) (Shown, bool)
	Messages(conversation string) []Shown
	// Addressed reports whether a user message's text mentions the bot
	// and has text besides the mention (it always reaches a session).
	Addressed(content string) bool
}

// Emulator is the Discord emulator as a Display.
func Emulator(emu *discordtest.Emulator) Display { return emulatorDisplay{emu} }

type emulatorDisplay struct{ emu *discordtest.Emulator }

func (d emulatorDisplay) shown(m discordtest.Message) Shown {
	order, _ := strconv.ParseUint(m.ID, 10, 64) // snowflakes increase in display order
	return Shown{ID: m.ID, Conversation: m.ChannelID, OwnKey: ":channel:" + m.ChannelID, Content: m.Content, Order: order,
		FromBot: m.Author.ID == d.emu.BotUserID() || m.WebhookID != "", OtherBot: m.Author.Bot, DM: m.GuildID == ""}
}

func (d emulatorDisplay) Message(id string) (Shown, bool) {
	m, ok := d.emu.Message(id)
	if !ok {
		return Shown{}, false
	}
	return d.shown(m), true
}

func (d emulatorDisplay) Messages(channel string) []Shown {
	var out []Shown
	for _, m := range d.emu.Messages(channel) {
		out = append(out, d.shown(m))
	}
	return out
}

func (d emulatorDisplay) Addressed(content string) bool {
	return addressed(content, "<@"+d.emu.BotUserID()+">")
}

// Multi is several platforms' displays as one (one process on
// Discord and Matrix): ids and conversation ids do not collide across them.
type Multi []Display

func (ds Multi) Message(id string) (Shown, bool) {
	for _, d := range ds {
		if m, ok := d.Message(id); ok {
			return m, true
		}
	}
	return Shown{}, false
}

func (ds Multi) Messages(conversation string) []Shown {
	var out []Shown
	for _, d := range ds {
		out = append(out, d.Messages(conversation)...)
	}
	return out
}

// Addressed: a platform's mention markup means nothing on another.
func (ds Multi) Addressed(content string) bool {
	for _, d := range ds {
		if d.Addressed(content) {
			return true
		}
	}
	return false
}

// Check compares what a chat displays with every transcript and
// returns the violations of invariants 1, 2 and 4:
//   - every bot message a channel displays is in exactly one transcript
//     entry, and every entry's message ids are displayed, in one channel,
//     with exactly the entry's text (split parts concatenated) - recovered
//     entries (finished after a crash) included;
//   - every user message addressed to the bot (a mention with some text) is
//     in exactly one transcript entry, unless notRouted names it (refused by
//     discord.access: never routed, so in no transcript);
//   - every entry is in a session its channel can route to: the channel's
//     own session (any agent's), a DM's session, or the target of a binding
//     of that channel (when the store has bindings);
//   - no message id is in two entries, no entry is written twice;
//   - each session's bot entries, and its user entries, are in display
//     order (message ids increase); an entry recovered after a crash is
//     appended when recovered, so only the entries after it are held to it.
//
// Text, order, and messages displayed that no entry holds are judged by
// audit.Compare, per conversation: the comparison `bot audit` runs on the
// real server.
func Check(ctx context.Context, chat Display, st Store, channels []string, notRouted map[string]bool) ([]string, error) {
	keys, err := st.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	boundTo, err := boundChannels(ctx, st)
	if err != nil {
		return nil, err
	}
	c := &checker{chat: chat, boundTo: boundTo, byMsg: map[string][]located{}, displayedIn: map[string][]transcript.Folded{}}
	for _, key := range keys {
		entries, err := st.Range(ctx, key, 0, 0)
		if err != nil {
			return nil, err
		}
		// Invariant 17: an entry shows its latest edit's text; a deleted
		// entry (erased, or with a deletion record) displays nothing.
		folded := transcript.Fold(entries)
		if hs, ok := st.(historyReader); ok {
			c.problems = append(c.problems, compareHistory(ctx, hs, key, folded)...)
		}
		for _, f := range folded {
			if f.IsChange() || len(f.MessageIDs) == 0 {
				continue
			}
			f.SessionKey = key
			c.entry(key, f)
		}
	}
	for id, ls := range c.byMsg {
		if len(ls) > 1 {
			c.problems = append(c.problems, fmt.Sprintf("message %s is in %d transcript entries", id, len(ls)))
		}
	}
	excepted, err := ruleOneExceptions(ctx, st)
	if err != nil {
		return nil, err
	}
	c.compare(channels, excepted, notRouted)
	slices.Sort(c.problems)
	return c.problems, nil
}

// checker is one Check's state: what it learnt of the transcripts and the
// problems found so far.
type checker struct {
	chat        Display
	boundTo     map[string]map[string]bool     // channel -> session keys bound to it, ever
	byMsg       map[string][]located           // message id -> the entries naming it
	displayedIn map[string][]transcript.Folded // conversation -> the entries it displays
	problems    []string
}

// boundChannels maps each channel to the session keys ever bound to it
// (empty when the store keeps no bindings).
func boundChannels(ctx context.Context, st Store) (map[string]map[string]bool, error) {
	boundTo := map[string]map[string]bool{}
	bs, ok := st.(bindingStore)
	if !ok {
		return boundTo, nil
	}
	recs, err := bs.Bindings(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		ch := r.Conversation.ConversationID
		if boundTo[ch] == nil {
			boundTo[ch] = map[string]bool{}
		}
		boundTo[ch][r.TargetSessionKey] = true
	}
	return boundTo, nil
}

// routable: message m's conversation can route to session key.
func (c *checker) routable(key string, m Shown) bool {
	if c.boundTo[m.Conversation][key] || strings.HasSuffix(key, m.OwnKey) {
		return true
	}
	return m.DM && strings.Contains(key, ":dm:")
}

// entry checks one folded entry of session key against the chat and files
// it under the conversation that displays it.
func (c *checker) entry(key string, f transcript.Folded) {
	for _, id := range f.MessageIDs {
		c.byMsg[id] = append(c.byMsg[id], located{key, f.Entry})
	}
	if f.Deleted && f.Text != "" {
		c.problems = append(c.problems, fmt.Sprintf("%s: deleted entry #%d keeps its text", key, f.Seq))
	}
	channel := ""
	var gone []string
	for _, id := range f.MessageIDs {
		m, ok := c.chat.Message(id)
		if !ok {
			gone = append(gone, id)
			continue
		}
		if channel != "" && m.Conversation != channel {
			c.problems = append(c.problems, fmt.Sprintf("%s: entry #%d spans channels %s and %s", key, f.Seq, channel, m.Conversation))
		}
		if channel == "" && !f.Deleted && !c.routable(key, m) {
			c.problems = append(c.problems, fmt.Sprintf("%s: entry #%d (%s) is displayed in channel %s, which never routed to this session", key, f.Seq, f.Source, m.Conversation))
		}
		channel = m.Conversation
	}
	// A part not displayed is the comparison's (extra) in the
	// conversation that displays the rest, or that the entry names.
	if channel == "" {
		channel = f.Meta[transcript.MetaDisplayedIn]
	}
	if channel != "" {
		c.displayedIn[channel] = append(c.displayedIn[channel], f)
	} else if !f.Deleted {
		for _, id := range gone {
			c.problems = append(c.problems, fmt.Sprintf("%s: entry #%d (%s, delivery %s) names message %s, which no channel displays", key, f.Seq, f.Source, f.DeliveryID, id))
		}
	}
}

// compare checks the channels asked for: no refused user message in a
// transcript; then text, order and what is displayed but held nowhere (the
// audit's comparison, which `bot audit` runs on the real server), in every
// conversation that displays an entry; a message no entry holds is looked
// for in the channels asked for.
func (c *checker) compare(channels []string, excepted, notRouted map[string]bool) {
	for _, ch := range channels {
		for _, m := range c.chat.Messages(ch) {
			if notRouted[m.ID] && len(c.byMsg[m.ID]) > 0 {
				c.problems = append(c.problems, fmt.Sprintf("channel %s: refused user message %s %q is in a transcript", ch, m.ID, Excerpt(m.Content)))
			}
		}
	}
	listed := map[string]bool{}
	convs := slices.Collect(maps.Keys(c.displayedIn))
	for _, ch := range channels {
		listed[ch] = true
		if _, ok := c.displayedIn[ch]; !ok {
			convs = append(convs, ch)
		}
	}
	slices.Sort(convs)
	for _, ch := range slices.Compact(convs) {
		shown := auditMessages(c.chat, c.chat.Messages(ch), excepted, notRouted)
		for _, d := range audit.Differences(audit.Compare(c.displayedIn[ch], shown)) {
			// The emulator keeps a deleted channel's messages: it cannot
			// tell an undeleted message from one of a deleted thread.
			if (d.Diff == audit.Missing && !listed[ch]) || d.Diff == audit.Undeleted {
				continue
			}
			c.problems = append(c.problems, rule1Difference(ch, d))
		}
	}
}

// historyReader is a store the transcript service can read the
// model-visible history from.
type historyReader interface {
	transcript.Store
}

// compareHistory checks that what the model sees of a session (History,
// the current generation's entries with edit and deletion records
// applied) is the fold of the raw entries: every entry of the current
// generation the chat still displays, in order, with its latest text. The
// display side of those entries is checked by Check itself.
func compareHistory(ctx context.Context, st historyReader, key string, folded []transcript.Folded) []string {
	gen, err := st.Generation(ctx, key)
	if err != nil {
		return []string{fmt.Sprintf("%s: generation: %v", key, err)}
	}
	var want []transcript.Folded
	for _, f := range folded {
		if f.Generation == gen && f.Shown() {
			want = append(want, f)
		}
	}
	got, err := transcript.New(transcript.Options{}, transcript.Deps{Store: st}).History(ctx, key, len(folded)+1)
	if err != nil {
		return []string{fmt.Sprintf("%s: history: %v", key, err)}
	}
	if len(got) != len(want) {
		return []string{fmt.Sprintf("%s: the model sees %d entries, the chat displays %d of the current generation", key, len(got), len(want))}
	}
	var out []string
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Text != want[i].Latest {
			out = append(out, fmt.Sprintf("%s: model-visible entry %d is #%d %q, the chat displays #%d %q", key, i, got[i].Seq, Excerpt(got[i].Text), want[i].Seq, Excerpt(want[i].Latest)))
		}
	}
	return out
}

// auditMessages are a conversation's messages as the audit compares
// them: a Rule 1 exception (excepted) is held to no entry, and a user
// message refused by access (notRouted) is not addressed to the bot.
func auditMessages(chat Display, ms []Shown, excepted, notRouted map[string]bool) []audit.Message {
	out := make([]audit.Message, 0, len(ms))
	for _, m := range ms {
		out = append(out, audit.Message{ID: m.ID, Conversation: m.Conversation, Text: m.Content, FromBot: m.FromBot && !excepted[m.ID],
			Addressed: !m.FromBot && !m.OtherBot && !notRouted[m.ID] && chat.Addressed(m.Content)})
	}
	return out
}

// rule1Difference is a difference of the audit as a Rule 1 problem.
func rule1Difference(ch string, d audit.Row) string {
	entry, display := "none", "none"
	if d.Entry != nil {
		entry = fmt.Sprintf("%s #%d (%s, delivery %s) %q", d.Entry.SessionKey, d.Entry.Seq, d.Entry.Source, d.Entry.DeliveryID, d.Entry.Latest)
	}
	if len(d.Messages) > 0 {
		display = fmt.Sprintf("%q", d.Shown())
	}
	return fmt.Sprintf("channel %s: message %s: %s: %s\n  entry:   %s\n  display: %s", ch, d.MessageID, d.Diff, d.Detail, entry, display)
}

// addressed reports whether a user message mentions the bot and has text
// besides the mention (such a message always reaches a session).
func addressed(content, mention string) bool {
	return strings.Contains(content, mention) && strings.TrimSpace(strings.ReplaceAll(content, mention, "")) != ""
}

// deliveryLister is implemented by stores with an outbox.
type deliveryLister interface {
	Deliveries(ctx context.Context, state delivery.PendingState, limit int) ([]delivery.Record, error)
}

// ruleOneExceptions returns the message ids Outbound delivered without an
// entry for a Rule 1 exception (DESIGN.md invariant 1: the conversation was
// bound to a different agent when the send was confirmed, or the payload
// had no text). Every other displayed bot message must be in a transcript.
func ruleOneExceptions(ctx context.Context, st Store) (map[string]bool, error) {
	out := map[string]bool{}
	ds, ok := st.(deliveryLister)
	if !ok {
		return out, nil
	}
	recs, err := ds.Deliveries(ctx, delivery.StateDelivered, 0)
	if err != nil {
		return nil, fmt.Errorf("rule 1: read outbox: %w", err)
	}
	for _, r := range recs {
		if r.Reason == delivery.SkipOtherAgent || r.Reason == delivery.SkipNativeOnly {
			for _, id := range r.MessageIDs {
				out[id] = true
			}
		}
	}
	return out, nil
}

func Excerpt(s string) string {
	r := []rune(strings.ReplaceAll(s, "\n", " "))
	if len(r) > 60 {
		return string(r[:60]) + "…"
	}
	return string(r)
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmp.Compare[string])
	return out
}
