package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		in      string
		want    Command
		wantErr string // substring; "not" for ErrNotCommand
	}{
		{in: "!spawn find the bug in parser.go", want: Command{Name: "spawn", Options: map[string]string{"task": "find the bug in parser.go"}}},
		{in: `!spawn label=bugs agent=researcher thread=yes "fix it: now" please`, want: Command{Name: "spawn", Options: map[string]string{"task": "fix it: now please", "label": "bugs", "agent": "researcher", "thread": "true"}}},
		{in: `!spawn task="a b" label='x y'`, want: Command{Name: "spawn", Options: map[string]string{"task": "a b", "label": "x y"}}},
		{in: "!focus !room:server", want: Command{Name: "focus", Options: map[string]string{"target": "!room:server"}}},
		{in: "!focus matrix:$event:with:colons", want: Command{Name: "focus", Options: map[string]string{"target": "matrix:$event:with:colons"}}},
		{in: "  !UNFOCUS  ", want: Command{Name: "unfocus", Options: map[string]string{}}},
		{in: "!stop", want: Command{Name: "stop", Options: map[string]string{}}},
		{in: "!stop bugs", want: Command{Name: "stop", Options: map[string]string{"target": "bugs"}}},
		{in: "!session idle 30m", want: Command{Name: "session", Sub: "idle", Options: map[string]string{"duration": "30m"}}},
		{in: "!session unbind", want: Command{Name: "session", Sub: "unbind", Options: map[string]string{}}},
		{in: `!cron add schedule="every 10m" summarise the news tz=Europe/Berlin`, want: Command{Name: "cron", Sub: "add", Options: map[string]string{"schedule": "every 10m", "prompt": "summarise the news", "tz": "Europe/Berlin"}}},
		{in: `!cron add schedule="*/5 * * * *" prompt="say \"hi\""`, want: Command{Name: "cron", Sub: "add", Options: map[string]string{"schedule": "*/5 * * * *", "prompt": `say "hi"`}}},
		{in: "!cron runs j1", want: Command{Name: "cron", Sub: "runs", Options: map[string]string{"id": "j1"}}},
		{in: "!help", want: Command{Name: "help", Options: map[string]string{}}},
		{in: "hello !spawn x", wantErr: "not"},
		{in: "!nosuch x", wantErr: "not"},
		{in: "!", wantErr: "not"},
		{in: `!"spawn" x`, wantErr: "not"},
		{in: "!spawn", wantErr: "needs task"},
		{in: "!spawn x colour=red", wantErr: `unknown option "colour"`},
		{in: "!spawn x thread=maybe", wantErr: "not yes or no"},
		{in: "!spawn x label=a label=b", wantErr: "given twice"},
		{in: "!spawn task=a b", wantErr: "given twice"},
		{in: `!spawn "unterminated`, wantErr: "unterminated quote"},
		{in: "!unfocus now", wantErr: "takes no text"},
		{in: "!cron", wantErr: "needs one of: add, list, remove, run, runs"},
		{in: "!cron frobnicate", wantErr: "unknown sub-command"},
		{in: "!cron add daily news", wantErr: "needs schedule"},
		{in: "!cron remove", wantErr: "needs id"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCommand(tt.in)
			switch {
			case tt.wantErr == "not":
				if !errors.Is(err, ErrNotCommand) {
					t.Fatalf("err = %v, want ErrNotCommand", err)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, ErrNotCommand) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			case !reflect.DeepEqual(got, tt.want):
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	c := Classifier{BotUserID: "@bot:hs", IsGhost: func(u string) bool { return strings.HasPrefix(u, "@agentbot_") }}
	ev := func(sender, typ, content string, extra ...string) json.RawMessage {
		s := `{"type":"` + typ + `","event_id":"$e1","sender":"` + sender + `","origin_server_ts":1700000000000,"content":` + content
		for _, x := range extra {
			s += "," + x
		}
		return json.RawMessage(s + "}")
	}
	tests := []struct {
		name string
		raw  json.RawMessage
		ok   bool
		want Inbound
	}{
		{"mention via m.mentions", ev("@alice:hs", "m.room.message", `{"msgtype":"m.text","body":"hi","m.mentions":{"user_ids":["@bot:hs"]}}`), true,
			Inbound{Kind: KindMessage, MsgType: "m.text", Body: "hi", MentionsBot: true}},
		{"id in body but empty m.mentions is no mention", ev("@alice:hs", "m.room.message", `{"msgtype":"m.text","body":"@bot:hs hi","m.mentions":{}}`), true,
			Inbound{Kind: KindMessage, MsgType: "m.text", Body: "@bot:hs hi"}},
		{"legacy client without m.mentions", ev("@alice:hs", "m.room.message", `{"msgtype":"m.text","body":"bot: hi","formatted_body":"<a href=\"https://matrix.to/#/@bot:hs\">bot</a>: hi"}`), true,
			Inbound{Kind: KindMessage, MsgType: "m.text", Body: "bot: hi", MentionsBot: true}},
		{"@room is not a bot mention", ev("@alice:hs", "m.room.message", `{"msgtype":"m.text","body":"@room hi","m.mentions":{"room":true}}`), true,
			Inbound{Kind: KindMessage, MsgType: "m.text", Body: "@room hi", MentionsRoom: true}},
		{"thread reply (fallback)", ev("@alice:hs", "m.room.message", `{"msgtype":"m.text","body":"x","m.relates_to":{"rel_type":"m.thread","event_id":"$root","is_falling_back":true,"m.in_reply_to":{"event_id":"$root"}}}`), true,
			Inbound{Kind: KindMessage, MsgType: "m.text", Body: "x", ThreadRoot: "$root"}},
		{"explicit reply inside a thread", ev("@alice:hs", "m.room.message", `{"msgtype":"m.text","body":"x","m.relates_to":{"rel_type":"m.thread","event_id":"$root","m.in_reply_to":{"event_id":"$e0"}}}`), true,
			Inbound{Kind: KindMessage, MsgType: "m.text", Body: "x", ThreadRoot: "$root", ReplyTo: "$e0"}},
		{"plain reply", ev("@alice:hs", "m.room.message", `{"msgtype":"m.text","body":"x","m.relates_to":{"m.in_reply_to":{"event_id":"$e0"}}}`), true,
			Inbound{Kind: KindMessage, MsgType: "m.text", Body: "x", ReplyTo: "$e0"}},
		{"edit", ev("@alice:hs", "m.room.message", `{"msgtype":"m.text","body":"* new","m.new_content":{"msgtype":"m.text","body":"new"},"m.relates_to":{"rel_type":"m.replace","event_id":"$e0"}}`), true,
			Inbound{Kind: KindEdit, MsgType: "m.text", Body: "new", Edits: "$e0"}},
		{"redaction (top-level redacts)", ev("@alice:hs", "m.room.redaction", `{}`, `"redacts":"$e0"`), true,
			Inbound{Kind: KindRedaction, Redacts: "$e0"}},
		{"redaction (v11 content.redacts)", ev("@alice:hs", "m.room.redaction", `{"redacts":"$e0"}`), true,
			Inbound{Kind: KindRedaction, Redacts: "$e0"}},
		{"own message", ev("@bot:hs", "m.room.message", `{"msgtype":"m.text","body":"hi"}`), false, Inbound{}},
		{"own redaction", ev("@bot:hs", "m.room.redaction", `{}`, `"redacts":"$e0"`), false, Inbound{}},
		{"ghost message", ev("@agentbot_researcher:hs", "m.room.message", `{"msgtype":"m.text","body":"hi"}`), false, Inbound{}},
		{"notice from another bot", ev("@otherbot:hs", "m.room.message", `{"msgtype":"m.notice","body":"hi","m.mentions":{"user_ids":["@bot:hs"]}}`), false, Inbound{}},
		{"redacted message", ev("@alice:hs", "m.room.message", `{}`), false, Inbound{}},
		{"state event", ev("@alice:hs", "m.room.topic", `{"topic":"x"}`, `"state_key":""`), false, Inbound{}},
		{"garbage", json.RawMessage(`{"type":`), false, Inbound{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := c.Classify(tt.raw)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tt.ok, got)
			}
			if !ok {
				return
			}
			tt.want.EventID, tt.want.Sender, tt.want.Time = "$e1", "@alice:hs", got.Time
			if got.Time.UnixMilli() != 1700000000000 || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		budget int
		want   []string
	}{
		{"fits", "hello world", 100, []string{"hello world"}},
		{"empty", "", 100, nil},
		{"paragraph cut", "aaaa aaaa\n\nbbbb bbbb", 14, []string{"aaaa aaaa\n\n", "bbbb bbbb"}},
		{"line cut", "aaaa aaaa\nbbbb bbbb", 12, []string{"aaaa aaaa\n", "bbbb bbbb"}},
		{"space cut", "aaaa bbbb cccc", 11, []string{"aaaa bbbb ", "cccc"}},
		{"hard cut", "abcdefghijkl", 8, []string{"abcdefgh", "ijkl"}},
		{"escapes count", `<<<<`, 12, []string{"<<", "<<"}},
		{"multibyte kept whole", "ééééé", 8, []string{"éééé", "é"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Split(tt.text, tt.budget); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Split = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("hello world\n\nsecond paragraph with <html> & \"quotes\" and émojis 🎉", 16)
	f.Add(strings.Repeat("x", 100), 8)
	f.Fuzz(func(t *testing.T, text string, budget int) {
		budget = 8 + abs(budget)%200
		parts := Split(text, budget)
		if strings.Join(parts, "") != text {
			t.Fatalf("parts do not add up to the text")
		}
		for _, p := range parts {
			if p == "" || JSONLen(p) > budget {
				t.Fatalf("part %q: JSON length %d, budget %d", p, JSONLen(p), budget)
			}
			if utf8.ValidString(text) && !utf8.ValidString(p) {
				t.Fatalf("part %q cuts a character", p)
			}
			b, _ := json.Marshal(p)
			if len(b)-2 != JSONLen(p) {
				t.Fatalf("JSONLen(%q) = %d, encoding/json writes %d", p, JSONLen(p), len(b)-2)
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func TestDefuse(t *testing.T) {
	for in, want := range map[string]string{
		"@room hi":             "@\u2060room hi",
		"a @room b @room":      "a @\u2060room b @\u2060room",
		"@roomy":               "@\u2060roomy",
		"email room@x, @alice": "email room@x, @alice",
	} {
		got := Defuse(in)
		if got != want || strings.Contains(got, "@room") {
			t.Errorf("Defuse(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFileTokenStore(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "sync-token")
	s := NewFileTokenStore(p)
	if tok, err := s.LoadSyncToken(ctx); err != nil || tok != "" {
		t.Fatalf("fresh load = %q, %v; want empty", tok, err)
	}
	for _, tok := range []string{"s1_2_3", "s9_9_9"} {
		if err := s.SaveSyncToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if got, err := NewFileTokenStore(p).LoadSyncToken(ctx); err != nil || got != tok {
			t.Fatalf("load = %q, %v; want %q", got, err, tok)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d files, want only the token (no temporary left)", len(entries))
	}
	if err := NewFileTokenStore(filepath.Join(p, "not-a-dir", "x")).SaveSyncToken(ctx, "t"); err == nil {
		t.Fatal("save under a file succeeded")
	}
}

// TestGatewayDefaultInvitePolicy: without an AcceptInvite hook the bot joins on invites from its own homeserver's
// users only (anyone on a federated server could otherwise pull it into their rooms).
func TestGatewayDefaultInvitePolicy(t *testing.T) {
	c, err := New(Options{HomeserverURL: "http://127.0.0.1:1", UserID: "@bot:example.org", AccessToken: "tok"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGateway(GatewayOptions{}, GatewayDeps{Client: c, Sessions: nopSessions{}, Bindings: nopBindings{}, Outbound: nopOutbound{}})
	if err != nil {
		t.Fatal(err)
	}
	for inviter, want := range map[string]bool{"@alice:example.org": true, "@eve:evil.example": false, "@eve:example.org.evil": false, "": false, "alice": false} {
		if got := g.d.AcceptInvite("!r:example.org", inviter); got != want {
			t.Errorf("invite from %q accepted=%v, want %v", inviter, got, want)
		}
	}
}

type nopSessions struct{}

func (nopSessions) HandleMessage(context.Context, session.Message) error { return nil }
func (nopSessions) MessageDeleted(context.Context, string) bool          { return false }
func (nopSessions) MessageEdited(string) bool                            { return false }
func (nopSessions) MessageDeletedIn(context.Context, binding.ConversationRef, string) bool {
	return false
}

type nopBindings struct{}

func (nopBindings) ResolveByConversation(binding.ConversationRef) (binding.Record, bool) {
	return binding.Record{}, false
}
func (nopBindings) Unbind(context.Context, binding.UnbindInput) ([]binding.Record, error) {
	return nil, nil
}
func (nopBindings) Touch(string, time.Time) {}

type nopOutbound struct{}

func (nopOutbound) Deliver(context.Context, delivery.Delivery, delivery.CommitFunc) (delivery.Result, error) {
	return delivery.Result{}, nil
}
func (nopOutbound) Delivered(context.Context, string) (bool, error) { return false, nil }
func (nopOutbound) WithConversation(_ binding.ConversationRef, fn func() error) error {
	return fn()
}
