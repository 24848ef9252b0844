package discord

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
)

// FuzzSplitMessage: the parts of any text are at most the limit in
// characters, none is empty (unless the text is), and they concatenate to
// the text exactly (invariant 12: no markers, nothing dropped or added).
func FuzzSplitMessage(f *testing.F) {
	for _, s := range []string{
		"", "hi", strings.Repeat("a", 2001), strings.Repeat("é", 2001), strings.Repeat("word ", 500),
		"```go\n" + strings.Repeat("x := 1\n", 400) + "```\nafter", strings.Repeat("\n", 4001),
		strings.Repeat("🙂", 1999) + "\n```", "\xff\xfe" + strings.Repeat("\x80", 3000),
		strings.Repeat("ab\n\n", 700), strings.Repeat("```", 1000),
	} {
		f.Add(s, 0)
		f.Add(s, 7)
	}
	f.Add("a b c d", 1)
	f.Add("\n```\n```", 2)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if limit < 0 || limit > 4000 {
			limit = limit%4000 + 4000
		}
		want := limit
		if want == 0 {
			want = MaxMessageLen
		}
		parts := SplitMessage(text, limit)
		if len(parts) == 0 {
			t.Fatal("no parts")
		}
		var b strings.Builder
		for i, p := range parts {
			if n := utf8.RuneCountInString(p); n > want {
				t.Fatalf("part %d has %d characters, limit %d", i, n, want)
			}
			if p == "" && text != "" {
				t.Fatalf("part %d is empty", i)
			}
			b.WriteString(p)
		}
		if b.String() != text {
			t.Fatalf("parts do not add up to the text (%d parts)", len(parts))
		}
		if utf8.ValidString(text) {
			for i, p := range parts {
				if !utf8.ValidString(p) {
					t.Fatalf("part %d cuts a character in two", i)
				}
			}
		}
	})
}

// FuzzSlashOptions: any interaction payload (a stale command registration
// can send options of another type, or none) parses without a panic, and
// the option readers return only values of their type, and the core's
// invocation carries each option with its own type (core/command fuzzes
// the durations).
func FuzzSlashOptions(f *testing.F) {
	for _, s := range []string{
		`{"type":2,"data":{"name":"session","options":[{"name":"idle","type":1,"options":[{"name":"duration","type":3,"value":"24h"}]}]}}`,
		`{"type":2,"data":{"name":"session","options":[{"name":"max-age","type":1,"options":[{"name":"duration","type":3,"value":"7d"}]}]}}`,
		`{"type":2,"data":{"name":"session","options":[{"name":"idle","type":1,"options":[{"name":"duration","type":4,"value":24}]}]}}`,
		`{"type":2,"data":{"name":"spawn","options":[{"name":"task","type":3,"value":"do it"},{"name":"thread","type":5,"value":true}]},"member":{"user":{"id":"1"}}}`,
		`{"type":2,"data":{"name":"spawn","options":[{"name":"thread","type":3,"value":"yes"},{"name":"task","type":5,"value":false}]}}`,
		`{"type":2,"data":{"name":"cron","options":[{"name":"add","type":1,"options":[{"name":"schedule","type":3,"value":"every 10m"},{"name":"prompt","type":3,"value":"hi"}]}]},"user":{"id":"2"}}`,
		`{"type":2,"data":{"name":"focus","options":[{"name":"target","type":3,"value":null}]}}`,
		`{"type":2,"data":{"name":"x","options":[null]}}`,
		`{"type":2,"data":{"name":"x","options":[{"name":"sub","type":1}]}}`,
		`{"type":2,"data":{"name":"x","options":[{"name":"group","type":2,"options":[{"name":"sub","type":1}]}]}}`,
		`{"type":2}`, `{"type":2,"data":null}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	names := []string{"duration", "task", "label", "agent", "thread", "target", "schedule", "prompt", "tz", "to", "id"}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var in discordgo.Interaction
		if json.Unmarshal(payload, &in) != nil {
			return
		}
		in.Type = discordgo.InteractionApplicationCommand
		if _, ok := in.Data.(discordgo.ApplicationCommandInteractionData); !ok {
			return // ApplicationCommandData would panic; discordgo only builds this type for type 2
		}
		v := parseInvocation(&in)
		for _, n := range names {
			if o, ok := v.opts[n]; ok && v.str(n) != "" && o.Type != discordgo.ApplicationCommandOptionString {
				t.Fatalf("str(%q) read a %v option", n, o.Type)
			}
			if o, ok := v.opts[n]; ok && v.boolPtr(n) != nil && o.Type != discordgo.ApplicationCommandOptionBoolean {
				t.Fatalf("boolPtr(%q) read a %v option", n, o.Type)
			}
		}
		core := (&Gateway{}).coreInvocation(v)
		for n, val := range core.Options {
			o := v.opts[n]
			switch val.(type) {
			case string:
				if o.Type != discordgo.ApplicationCommandOptionString {
					t.Fatalf("option %q of type %v is a string in the invocation", n, o.Type)
				}
			case bool:
				if o.Type != discordgo.ApplicationCommandOptionBoolean {
					t.Fatalf("option %q of type %v is a bool in the invocation", n, o.Type)
				}
			case int64:
				if o.Type != discordgo.ApplicationCommandOptionInteger {
					t.Fatalf("option %q of type %v is an integer in the invocation", n, o.Type)
				}
			default:
				t.Fatalf("option %q is a %T in the invocation", n, val)
			}
		}
		if core.Name != v.name || core.Sub != v.sub || core.UserID != v.userID {
			t.Fatalf("invocation %s %s by %q, parsed %s %s by %q", core.Name, core.Sub, core.UserID, v.name, v.sub, v.userID)
		}
	})
}

// FuzzInboundModelText: a direct message with any content reaches the
// session with its text exactly as displayed (transcripts keep it), is
// dropped only when it is empty apart from the bot's mention, and the
// model text derived from it holds no mention markup of the bot.
func FuzzInboundModelText(f *testing.F) {
	for _, s := range []string{
		"hello", "<@1> hello", "<@!1> hi <@1>", "<@1>", "  <@!1>  ", "<@12> not me", "<<@1>@1>", "<@1<@1>>",
		"@everyone <@&5> <#6>", "", "\x00", "\xff<@1>\xfe", strings.Repeat("<@1>", 100), "```\n<@1>\n```",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		sess := &fakeSessions{}
		c, a := wire(t, ClientOptions{}, ClientDeps{Log: zerolog.Nop()}, GatewayOptions{}, GatewayDeps{Sessions: sess, Bindings: &fakeBindings{}, Clock: clock.Real{}, Log: zerolog.Nop()})
		c.setIdentity("1", "agentbot", "")
		m := &discordgo.Message{ID: "9", ChannelID: "50", Author: &discordgo.User{ID: "2", Username: "alice"}, Content: content}
		decision := a.route(context.Background(), m, false)
		empty := strings.TrimSpace(stripMention(content, "1")) == ""
		switch {
		case empty && decision != inEmpty:
			t.Fatalf("empty message routed: %q", decision)
		case !empty && decision != inRouted:
			t.Fatalf("message not routed: %q", decision)
		case !empty:
			if len(sess.got) != 1 || sess.got[0].Text != content || sess.got[0].Conversation.ConversationID != "user:2" {
				t.Fatalf("session got %+v, want the text as displayed from user:2", sess.got)
			}
		}
		text := c.ModelText(content)
		if strings.Contains(text, "<@1>") || strings.Contains(text, "<@!1>") {
			t.Fatalf("ModelText(%q) = %q keeps the bot's mention markup", content, text)
		}
		if text != strings.TrimSpace(text) {
			t.Fatalf("ModelText(%q) = %q is not trimmed", content, text)
		}
	})
}

// TestSplitMatchesReference: the linear SplitMessage cuts exactly where the
// quadratic one it replaced did, on texts made of the separators it looks
// for (too slow to check inside the fuzz loop, where minimizing re-runs it).
func TestSplitMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"```", "\n", "\n\n", " ", "a", "word", "é", "🙂", "\n```go\n", "\xff", "`"}
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := rng.IntN(400); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text, limit := b.String(), 1+rng.IntN(120)
		if i%10 == 0 {
			limit = 0
		}
		if got, want := SplitMessage(text, limit), referenceSplit(text, limit); !slices.Equal(got, want) {
			t.Fatalf("SplitMessage(%q, %d) = %q, reference %q", text, limit, got, want)
		}
	}
}

// referenceSplit is SplitMessage before its cuts were made linear.
func referenceSplit(text string, limit int) []string {
	if limit <= 0 {
		limit = MaxMessageLen
	}
	var parts []string
	for utf8.RuneCountInString(text) > limit {
		maxOff := byteOffset(text, limit)
		window := text[:maxOff]
		minOff := len(window) / 2
		outside := func(i int) bool { return strings.Count(window[:i], "```")%2 == 0 }
		cut := maxOff
	search:
		for _, requireOutside := range []bool{true, false} {
			for _, sep := range []string{"\n```", "\n\n", "\n", " "} {
				end := len(window)
				for {
					i := strings.LastIndex(window[:end], sep)
					if i < minOff {
						break
					}
					c := i + len(sep)
					if sep == "\n```" {
						c = i + 1
					}
					if !requireOutside || outside(c) {
						cut = c
						break search
					}
					end = i
				}
			}
		}
		parts = append(parts, text[:cut])
		text = text[cut:]
	}
	if text != "" || len(parts) == 0 {
		parts = append(parts, text)
	}
	return parts
}
