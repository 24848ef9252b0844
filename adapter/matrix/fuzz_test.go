package matrix

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzClassify: whatever an event holds, Classify does not panic, drops the bot's own events, and every id it
// takes from the sender's content (thread root, edited event, redacted event) is syntactically an event id - a
// conversation id ("user:@x", "!room") never comes out of m.relates_to (invariant 18; the gateway then checks the
// root is an event of the same room).
func FuzzClassify(f *testing.F) {
	seeds := []struct{ typ, sender, rel, relID, msgtype, body, redacts string }{
		{"m.room.message", "@alice:hs", "", "", "m.text", "hi @bot:hs", ""},
		{"m.room.message", "@alice:hs", "m.thread", "$root", "m.text", "in a thread", ""},
		{"m.room.message", "@mallory:hs", "m.thread", "user:@victim:hs", "m.text", "forged", ""},
		{"m.room.message", "@mallory:hs", "m.thread", "!private:hs", "m.text", "forged", ""},
		{"m.room.message", "@mallory:hs", "m.thread", "$/../../x", "m.text", "path", ""},
		{"m.room.message", "@alice:hs", "m.replace", "$orig", "m.text", "* edited", ""},
		{"m.room.message", "@bot:hs", "", "", "m.text", "own", ""},
		{"m.room.message", "@alice:hs", "", "", "m.notice", "a bot", ""},
		{"m.room.redaction", "@alice:hs", "", "", "", "", "$gone"},
		{"m.room.redaction", "@alice:hs", "", "", "", "", "user:@victim:hs"},
		{"m.room.message", "@alice:hs", "m.in_reply_to", "$x", "m.text", "!spawn task=x", ""},
	}
	for _, s := range seeds {
		f.Add(s.typ, s.sender, s.rel, s.relID, s.msgtype, s.body, s.redacts)
	}
	c := Classifier{BotUserID: "@bot:hs", IsGhost: func(u string) bool { return strings.HasPrefix(u, "@agentbot_") }}
	f.Fuzz(func(t *testing.T, typ, sender, rel, relID, msgtype, body, redacts string) {
		content := map[string]any{"msgtype": msgtype, "body": body, "redacts": redacts}
		if rel != "" {
			r := map[string]any{"rel_type": rel, "event_id": relID, "m.in_reply_to": map[string]any{"event_id": relID}}
			content["m.relates_to"] = r
			content["m.new_content"] = map[string]any{"msgtype": msgtype, "body": body}
		}
		raw, err := json.Marshal(map[string]any{"type": typ, "event_id": "$ev", "sender": sender, "origin_server_ts": 1, "redacts": redacts, "content": content})
		if err != nil {
			t.Skip()
		}
		in, ok := c.Classify(raw)
		if !ok {
			return
		}
		if sender == "@bot:hs" || strings.HasPrefix(sender, "@agentbot_") {
			t.Fatalf("the bot's own event (%s) classified as %v", sender, in.Kind)
		}
		if in.ThreadRoot != "" && !ValidEventID(in.ThreadRoot) {
			t.Fatalf("thread root %q is no event id", in.ThreadRoot)
		}
		switch in.Kind {
		case KindMessage:
			if in.MsgType == "" || in.MsgType == "m.notice" {
				t.Fatalf("message of type %q taken", in.MsgType)
			}
		case KindEdit:
			if !ValidEventID(in.Edits) {
				t.Fatalf("edit of %q (no event id)", in.Edits)
			}
		case KindRedaction:
			if !ValidEventID(in.Redacts) {
				t.Fatalf("redaction of %q (no event id)", in.Redacts)
			}
		default:
			t.Fatalf("kind %v from an event", in.Kind)
		}
		// Raw bytes around the same shape must not panic either.
		_, _ = c.Classify(raw[:len(raw)/2])
	})
}

// FuzzParseCommand: any body parses without panic; a parsed command is a known one whose options are known and
// whose required options are present; a body not starting with "!" is never a command.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"!spawn summarise this", "!spawn task=\"a b\" thread=no label=x", "!cron add schedule=\"every 10m\" ping",
		"!cron list", "!cron", "!focus agent:main:matrix:dm:@victim:hs", "!stop", "!session idle 2h", "hello !spawn", "!", "!'spawn' x",
		"!spawn \"unterminated", "!cron add schedule=x prompt=y prompt=z", "!SPAWN x", "!reset now", "!stop target=\\\"x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		cmd, err := ParseCommand(body)
		if err != nil {
			if !strings.HasPrefix(strings.TrimSpace(body), CommandPrefix) && !errors.Is(err, ErrNotCommand) {
				t.Fatalf("%q: a non-command gave %v", body, err)
			}
			return
		}
		spec, ok := commandSpecs[cmd.Name]
		if !ok {
			t.Fatalf("%q: unknown command %q parsed", body, cmd.Name)
		}
		if cmd.Sub != "" {
			if spec, ok = spec.subs[cmd.Sub]; !ok {
				t.Fatalf("%q: unknown sub-command %q parsed", body, cmd.Sub)
			}
		} else if spec.subs != nil {
			t.Fatalf("%q: %s parsed without its sub-command", body, cmd.Name)
		}
		for name, v := range cmd.Options {
			o, known := spec.opt(name)
			if !known {
				t.Fatalf("%q: unknown option %q parsed", body, name)
			}
			if o.boolean && v != "true" && v != "false" {
				t.Fatalf("%q: boolean %s = %q", body, name, v)
			}
		}
		for _, o := range spec.opts {
			if o.required && strings.TrimSpace(cmd.Options[o.name]) == "" {
				t.Fatalf("%q: required %s missing", body, o.name)
			}
		}
	})
}
