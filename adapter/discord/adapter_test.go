package discord

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
)

func restErr(status, code int) error {
	e := &discordgo.RESTError{Response: &http.Response{StatusCode: status}}
	if code != 0 {
		e.Message = &discordgo.APIErrorMessage{Code: code, Message: "x"}
	}
	return e
}

func TestClassify(t *testing.T) {
	netErr := &url.Error{Op: "Post", URL: "https://discord.com/api/v9/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := []struct {
		name      string
		err       error
		want      error
		retryable bool
	}{
		{"10003 unknown channel", restErr(404, 10003), delivery.ErrDestinationGone, false},
		{"10015 unknown webhook", restErr(404, 10015), errWebhookUnusable, false},
		{"50027 invalid webhook token", restErr(401, 50027), errWebhookUnusable, false},
		{"30007 too many webhooks", restErr(400, 30007), errWebhookUnusable, false},
		{"50001 missing access", restErr(403, 50001), delivery.ErrForbidden, false},
		{"50013 missing permissions", restErr(403, 50013), delivery.ErrForbidden, false},
		{"50035 invalid form body", restErr(400, 50035), delivery.ErrRejected, false},
		{"50006 empty message", restErr(400, 50006), delivery.ErrRejected, false},
		{"50083 archived thread", restErr(400, 50083), delivery.ErrDestinationGone, false},
		{"160005 locked thread", restErr(403, 160005), delivery.ErrDestinationGone, false},
		{"429 status", restErr(429, 0), delivery.ErrTransient, true},
		{"429 rate limit error", &discordgo.RateLimitError{RateLimit: &discordgo.RateLimit{TooManyRequests: &discordgo.TooManyRequests{RetryAfter: time.Second}}}, delivery.ErrTransient, true},
		{"500", restErr(500, 0), delivery.ErrTransient, true},
		{"502", restErr(502, 0), delivery.ErrTransient, true},
		{"503", restErr(503, 0), delivery.ErrTransient, true},
		{"network", netErr, delivery.ErrTransient, true},
		{"deadline", context.DeadlineExceeded, delivery.ErrTransient, true},
		{"404 without code", restErr(404, 0), delivery.ErrDestinationGone, false},
		{"403 without code", restErr(403, 0), delivery.ErrForbidden, false},
		{"400 without code", restErr(400, 0), delivery.ErrRejected, false},
	}
	sentinels := []error{delivery.ErrDestinationGone, delivery.ErrForbidden, delivery.ErrRejected, delivery.ErrTransient, errWebhookUnusable}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			if !errors.Is(got, tc.want) {
				t.Fatalf("classify = %v, want %v", got, tc.want)
			}
			for _, s := range sentinels {
				if s != tc.want && errors.Is(got, s) {
					t.Errorf("classify = %v is also %v", got, s)
				}
			}
			if retryable(got) != tc.retryable {
				t.Errorf("retryable = %v, want %v", retryable(got), tc.retryable)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("classify dropped the cause: %v", got)
			}
		})
	}
	if classify(nil) != nil {
		t.Fatal("classify(nil) != nil")
	}
}

func TestRetryOnlyRetryable(t *testing.T) {
	a := newTestClient(t, ClientOptions{RetryBackoff: time.Millisecond}, ClientDeps{})
	for _, tc := range []struct {
		err   error
		calls int
	}{
		{restErr(500, 0), retryAttempts},
		{restErr(404, 10003), 1},
		{restErr(403, 50013), 1},
		{restErr(400, 50035), 1},
		{restErr(404, 10015), 1},
	} {
		n := 0
		err := a.retry(context.Background(), func() error { n++; return tc.err })
		if n != tc.calls || err == nil {
			t.Errorf("%v: %d calls (err %v), want %d", tc.err, n, err, tc.calls)
		}
	}
	n := 0
	if err := a.retry(context.Background(), func() error {
		n++
		if n < 2 {
			return restErr(503, 0)
		}
		return nil
	}); err != nil || n != 2 {
		t.Fatalf("transient then ok: %d calls, err %v", n, err)
	}
}

func TestNonceFor(t *testing.T) {
	seen := map[string]bool{}
	for _, id := range []string{"", "turn:1", "announce:agent:main:subagent:abc:1", strings.Repeat("x", 500)} {
		for part := range 3 {
			n := nonceFor(id, part)
			if n != nonceFor(id, part) {
				t.Fatalf("nonce of %q/%d is not stable", id, part)
			}
			if len(n) == 0 || len(n) > 25 {
				t.Fatalf("nonce %q has %d characters, want 1..25", n, len(n))
			}
			if seen[n] {
				t.Fatalf("nonce %q repeats for a different send", n)
			}
			seen[n] = true
		}
	}
}

// ---- transport and token freshness ----

// fakeDiscord is a tiny REST server that records each request's
// Authorization header and answers the calls the thread and webhook
// managers make.
type fakeDiscord struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []fakeReq
}

type fakeReq struct{ method, path, auth, host string }

func newFakeDiscord(t *testing.T) *fakeDiscord {
	f := &fakeDiscord{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, fakeReq{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Host})
		n := len(f.reqs)
		f.mu.Unlock()
		p := strings.TrimPrefix(r.URL.Path, "/api/v9")
		w.Header().Set("Content-Type", "application/json")
		var body any
		switch {
		case r.Method == "GET" && strings.HasPrefix(p, "/channels/"):
			body = map[string]any{"id": strings.TrimPrefix(p, "/channels/"), "guild_id": "100", "type": 0, "name": "general"}
		case r.Method == "GET" && strings.HasSuffix(p, "/threads/active"):
			body = map[string]any{"threads": []any{}, "members": []any{}}
		case r.Method == "POST" && strings.HasSuffix(p, "/threads"):
			body = map[string]any{"id": "9" + strconv.Itoa(n), "type": 11, "guild_id": "100", "parent_id": strings.Split(p, "/")[2], "name": "t"}
		case r.Method == "PUT" && strings.Contains(p, "/thread-members/"):
			w.WriteHeader(http.StatusNoContent)
			return
		case r.Method == "POST" && strings.HasSuffix(p, "/webhooks"):
			body = map[string]any{"id": "8" + strconv.Itoa(n), "token": "wtok", "type": 1, "channel_id": strings.Split(p, "/")[2]}
		case r.Method == "POST" && strings.HasPrefix(p, "/webhooks/"):
			body = map[string]any{"id": "7" + strconv.Itoa(n), "channel_id": r.URL.Query().Get("thread_id"), "content": "x"}
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":0,"message":"404: Not Found"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeDiscord) since(i int) []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReq(nil), f.reqs[i:]...)
}

func (f *fakeDiscord) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func TestTransportRewritesToAPIBase(t *testing.T) {
	f := newFakeDiscord(t)
	var ts tokenSource
	ts.Set("tok")
	tr, err := newTransport(f.srv.URL, &ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: tr}
	req, _ := http.NewRequest("GET", discordgo.EndpointChannel("42"), nil)
	req.Header.Set("Authorization", "Bot stale")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A request without Authorization (webhook token / interaction
	// callbacks authenticate by URL) stays without one.
	req, _ = http.NewRequest("POST", discordgo.EndpointWebhookToken("1", "t"), strings.NewReader("{}"))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := f.since(0)
	host := strings.TrimPrefix(f.srv.URL, "http://")
	if len(got) != 2 || got[0].path != "/api/v9/channels/42" || got[0].auth != "Bot tok" || got[0].host != host {
		t.Fatalf("first request = %+v, want /api/v9/channels/42 with the newest token on %s", got, host)
	}
	if got[1].auth != "" || got[1].path != "/api/v9/webhooks/1/t" {
		t.Fatalf("webhook request = %+v, want no Authorization", got[1])
	}
	if req.Header.Get("Authorization") != "" || req.URL.Host != "discord.com" {
		t.Fatal("the caller's request was mutated")
	}
	for _, bad := range []string{"ftp://x", "127.0.0.1:80", "http://"} {
		if _, err := newTransport(bad, &ts, nil); err == nil {
			t.Errorf("newTransport(%q) accepted", bad)
		}
	}
	// A path in the base is kept as a prefix (REST proxies).
	tr, _ = newTransport(f.srv.URL+"/proxy/", &ts, nil)
	req, _ = http.NewRequest("GET", discordgo.EndpointChannel("43"), nil)
	resp, err = (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := f.since(2); got[0].path != "/proxy/api/v9/channels/43" {
		t.Fatalf("proxied path = %s", got[0].path)
	}
}

// TestNewestTokenAfterManagerReuse: the thread and webhook managers are
// built once; after SetToken, their next REST calls (through the same
// adapter, session and managers) carry the new token.
func TestNewestTokenAfterManagerReuse(t *testing.T) {
	f := newFakeDiscord(t)
	a := newTestClient(t, ClientOptions{Token: "old-token", APIURL: f.srv.URL, RetryBackoff: time.Millisecond}, ClientDeps{})
	s := a.session()
	threads, hooks := a.threads, a.hooks
	ctx := context.Background()
	parent := a.ref("500", "")

	use := func() {
		t.Helper()
		th, err := a.CreateThread(ctx, parent, "🤖 worker")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hooks.send(ctx, s, "500", th.ConversationID, delivery.Delivery{ID: "d", Persona: delivery.Persona{Name: "🤖 worker"}}, []string{"hi"}); err != nil {
			t.Fatal(err)
		}
	}
	use()
	first := f.since(0)
	a.SetToken("new-token")
	mark := f.count()
	use()
	if a.threads != threads || a.hooks != hooks || a.session() != s {
		t.Fatal("managers or session were rebuilt")
	}
	check := func(reqs []fakeReq, want string) {
		t.Helper()
		botCalls := 0
		for _, r := range reqs {
			if strings.HasPrefix(r.path, "/api/v9/webhooks/") {
				continue // authenticated by the webhook token in the URL
			}
			botCalls++
			if r.auth != want {
				t.Errorf("%s %s carried %q, want %q", r.method, r.path, r.auth, want)
			}
		}
		if botCalls == 0 {
			t.Fatal("no bot-authenticated calls")
		}
	}
	check(first, "Bot old-token")
	second := f.since(mark)
	check(second, "Bot new-token")
	// The second round reused the persisted-in-memory webhook: no new create.
	for _, r := range second {
		if r.method == "POST" && strings.HasSuffix(r.path, "/webhooks") {
			t.Errorf("webhook recreated after token change: %+v", r)
		}
	}
}

// ---- inbound routing and echo suppression ----

// sessionsAPI names Sessions for embedding (its Sessions method would be
// shadowed by a field of the same name).
type sessionsAPI = Sessions

type fakeSessions struct {
	sessionsAPI // unused methods panic
	mu          sync.Mutex
	got         []session.Message
}

func (f *fakeSessions) HandleMessage(_ context.Context, m session.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, m)
	return nil
}

type fakeBindings struct {
	Bindings                           // unused methods panic
	bound    map[string]binding.Record // conversation id -> record
	touched  []string
}

func (f *fakeBindings) ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool) {
	r, ok := f.bound[ref.ConversationID]
	return r, ok
}

func (f *fakeBindings) Touch(id string, _ time.Time) { f.touched = append(f.touched, id) }

func TestRouteEchoSuppression(t *testing.T) {
	const bot, hook, guild = "1", "77", "900"
	user := &discordgo.User{ID: "2", Username: "alice"}
	mention := []*discordgo.User{{ID: bot}}
	tests := []struct {
		name    string
		m       discordgo.Message
		guilds  []string
		want    string
		touched bool
	}{
		{"own message", discordgo.Message{ChannelID: "10", GuildID: guild, Author: &discordgo.User{ID: bot, Bot: true}, Content: "<@1> hi", Mentions: mention}, nil, inOwnMessage, false},
		{"own webhook", discordgo.Message{ChannelID: "20", GuildID: guild, WebhookID: hook, Author: &discordgo.User{ID: hook, Bot: true}, Content: "intro"}, nil, inOwnMessage, false},
		{"own webhook in bound thread", discordgo.Message{ChannelID: "30", GuildID: guild, WebhookID: hook, Author: &discordgo.User{ID: hook, Bot: true}, Content: "done"}, nil, inOwnMessage, false},
		{"other webhook", discordgo.Message{ChannelID: "30", GuildID: guild, WebhookID: "88", Author: &discordgo.User{ID: "88", Bot: true}, Content: "<@1> hi", Mentions: mention}, nil, inOtherBot, false},
		{"other bot", discordgo.Message{ChannelID: "10", GuildID: guild, Author: &discordgo.User{ID: "3", Bot: true}, Content: "<@1> hi", Mentions: mention}, nil, inOtherBot, false},
		{"nil author", discordgo.Message{ChannelID: "10", GuildID: guild}, nil, inOwnMessage, false},
		{"guild without mention", discordgo.Message{ChannelID: "10", GuildID: guild, Author: user, Content: "hello all"}, nil, inNotMentioned, false},
		{"guild with mention", discordgo.Message{ChannelID: "10", GuildID: guild, Author: user, Content: "<@1> hello", Mentions: mention}, nil, inRouted, false},
		{"guild mention only", discordgo.Message{ChannelID: "10", GuildID: guild, Author: user, Content: "<@1>  ", Mentions: mention}, nil, inEmpty, false},
		{"bound thread without mention", discordgo.Message{ChannelID: "30", GuildID: guild, Author: user, Content: "go on"}, nil, inRouted, true},
		{"DM without mention", discordgo.Message{ChannelID: "40", Author: user, Content: "hi"}, nil, inRouted, false},
		{"guild not allowed", discordgo.Message{ChannelID: "10", GuildID: guild, Author: user, Content: "<@1> hi", Mentions: mention}, []string{"901"}, inNotAllowed, false},
		{"guild allowed", discordgo.Message{ChannelID: "10", GuildID: guild, Author: user, Content: "<@1> hi", Mentions: mention}, []string{guild}, inRouted, false},
		{"DM with allowlist", discordgo.Message{ChannelID: "40", Author: user, Content: "hi"}, []string{"901"}, inRouted, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ss := &fakeSessions{}
			bs := &fakeBindings{bound: map[string]binding.Record{"30": {ID: "b1", TargetSessionKey: "agent:main:subagent:x"}}}
			c, a := wire(t, ClientOptions{Guilds: tc.guilds, APIURL: newFakeDiscord(t).srv.URL}, ClientDeps{}, GatewayOptions{}, GatewayDeps{Sessions: ss, Bindings: bs})
			c.setIdentity(bot, "", "")
			c.hooks.own.Store(hook, struct{}{})
			m := tc.m
			if m.GuildID != "" && m.Member == nil {
				m.Member = &discordgo.Member{} // a guild MESSAGE_CREATE carries its author's member
			}
			if got := a.route(context.Background(), &m, false); got != tc.want {
				t.Fatalf("route = %s, want %s", got, tc.want)
			}
			if routed := len(ss.got) == 1; routed != (tc.want == inRouted) {
				t.Fatalf("HandleMessage called %d times", len(ss.got))
			}
			if tc.want == inRouted {
				conv := ss.got[0].Conversation
				want := "10"
				switch {
				case m.GuildID == "":
					want = "user:" + user.ID
				case m.ChannelID == "30":
					want = "30"
				}
				if conv.ConversationID != want || conv.Channel != "discord" || conv.AccountID != "default" {
					t.Fatalf("conversation = %+v, want %s", conv, want)
				}
			}
			if (len(bs.touched) > 0) != tc.touched {
				t.Fatalf("touched = %v, want touched %v", bs.touched, tc.touched)
			}
		})
	}
}
