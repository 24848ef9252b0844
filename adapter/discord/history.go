package discord

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/audit"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// HistoryOptions configure a History.
type HistoryOptions struct {
	Token         string
	APIURL        string            // REST base override; "" = Discord
	BaseTransport http.RoundTripper // nil: http.DefaultTransport
}

// History reads what channels display now over REST (the audit's
// audit.Display for Discord). It needs Read Message History where it
// reads.
type History struct {
	s *discordgo.Session

	once  sync.Once
	botID string
	err   error
}

// NewHistory returns a REST-only reader. It does no I/O.
func NewHistory(o HistoryOptions) (*History, error) {
	tok := CleanToken(o.Token)
	if tok == "" {
		return nil, fmt.Errorf("discord: no token: %w", ErrBadToken)
	}
	ts := &tokenSource{}
	ts.Set(tok)
	tr, err := newTransport(o.APIURL, ts, o.BaseTransport)
	if err != nil {
		return nil, err
	}
	s, err := discordgo.New("Bot " + tok)
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	s.Client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	s.StateEnabled = false
	return &History{s: s}, nil
}

var _ audit.Display = (*History)(nil)

// Read returns t's newest messages back to message oldest (inclusive), at
// most limit, oldest first. A DM ("user:<id>") is read in the bot's DM
// channel with that user.
func (h *History) Read(ctx context.Context, t audit.Target, oldest string, limit int) ([]audit.Message, error) {
	h.once.Do(func() {
		u, err := h.s.User("@me", discordgo.WithContext(ctx))
		if err != nil {
			h.err = checkErr("get bot user", err)
			return
		}
		h.botID = u.ID
	})
	if h.err != nil {
		return nil, h.err
	}
	channel, dm := t.ID, false
	if user, ok := strings.CutPrefix(t.ID, sessionkey.DMPrefix); ok {
		ch, err := h.s.UserChannelCreate(user, discordgo.WithContext(ctx))
		if err != nil {
			return nil, restError(fmt.Errorf("open the DM channel of user %s: %w", user, err))
		}
		channel, dm = ch.ID, true
	}
	var back []*discordgo.Message // newest first
	before := ""
	for len(back) < limit {
		page, err := h.s.ChannelMessages(channel, min(100, limit-len(back)), before, "", "", discordgo.WithContext(ctx))
		if err != nil {
			return nil, restError(fmt.Errorf("read channel %s: %w", channel, err))
		}
		back = append(back, page...)
		if len(page) == 0 || slices.ContainsFunc(page, func(m *discordgo.Message) bool { return m.ID == oldest }) ||
			(oldest != "" && compareIDs(page[len(page)-1].ID, oldest) < 0) {
			break
		}
		before = page[len(page)-1].ID
	}
	slices.SortFunc(back, func(x, y *discordgo.Message) int { return compareIDs(x.ID, y.ID) })
	if oldest != "" {
		back = slices.DeleteFunc(back, func(m *discordgo.Message) bool { return compareIDs(m.ID, oldest) < 0 })
	}
	mine := h.botWebhooks(ctx, channel, back)
	out := make([]audit.Message, 0, len(back))
	for _, m := range back {
		out = append(out, h.shown(t.ID, m, dm, mine))
	}
	return out, nil
}

// shown is m as the audit compares it.
func (h *History) shown(conv string, m *discordgo.Message, dm bool, mine func(string) bool) audit.Message {
	a := audit.Message{ID: m.ID, Conversation: conv, Text: m.Content, At: m.Timestamp, Edited: m.EditedTimestamp != nil}
	if m.Author != nil {
		a.Author = m.Author.Username
		a.FromBot = m.Author.ID == h.botID || (m.WebhookID != "" && mine(m.WebhookID))
	}
	for _, f := range m.Attachments {
		a.Attachments = append(a.Attachments, f.Filename)
	}
	mention := "<@" + h.botID + ">"
	text := strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(m.Content, "<@!"+h.botID+">", ""), mention, ""))
	mentioned := slices.ContainsFunc(m.Mentions, func(u *discordgo.User) bool { return u.ID == h.botID })
	a.Addressed = !a.FromBot && (m.Author == nil || !m.Author.Bot) && (dm || (mentioned && text != ""))
	return a
}

// botWebhooks reports which webhooks of the messages are the bot's: its
// application's (interaction replies) and the channel's (or, for a thread,
// its parent's) webhooks the bot made. When the channel's webhooks cannot
// be listed (no Manage Webhooks), every webhook message counts as the
// bot's.
func (h *History) botWebhooks(ctx context.Context, channel string, msgs []*discordgo.Message) func(string) bool {
	if !slices.ContainsFunc(msgs, func(m *discordgo.Message) bool { return m.WebhookID != "" && m.WebhookID != h.botID }) {
		return func(id string) bool { return id == h.botID }
	}
	ids := map[string]bool{h.botID: true}
	where := channel
	if ch, err := h.s.Channel(channel, discordgo.WithContext(ctx)); err == nil && ch.IsThread() {
		where = ch.ParentID
	}
	hooks, err := h.s.ChannelWebhooks(where, discordgo.WithContext(ctx))
	if err != nil {
		return func(string) bool { return true }
	}
	for _, w := range hooks {
		if w.ApplicationID == h.botID || (w.User != nil && w.User.ID == h.botID) {
			ids[w.ID] = true
		}
	}
	return func(id string) bool { return ids[id] }
}
