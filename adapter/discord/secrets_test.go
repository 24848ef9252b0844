package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/delivery"
)

// Secrets the failing-REST tests look for in every log line and error text.
const (
	secretBotToken     = "MTE5ODg0NzI1NjQ4NzQ3NzE5Mg.GxYz12.bot-token-secret-abcdefghijkl"
	secretWebhookToken = "webhook-token-secret-0123456789abcdefghijkl"
	secretInterToken   = "aW50ZXJhY3Rpb246interaction-token-secret-0123456789"
	testAppID          = "4242"
	testHookID         = "7777"
)

type memWebhooks struct{}

func (memWebhooks) PutWebhook(context.Context, string, string, string) error { return nil }
func (memWebhooks) Webhook(context.Context, string) (string, string, bool, error) {
	return testHookID, secretWebhookToken, true, nil
}
func (memWebhooks) DeleteWebhook(context.Context, string) error { return nil }

// failingDiscord serves the calls a send needs before the one under test
// (a thread lookup, an interaction callback and @original) and makes every
// request whose path contains failOn fail: "drop" closes the connection
// without a response (a network error), "stall" never answers (the
// caller's deadline fires).
type failingDiscord struct {
	srv    *httptest.Server
	mode   string
	failOn string
	mu     sync.Mutex
	failed int
	bodies []sentBody // every POST and PATCH, as received
	stop   chan struct{}
}

type sentBody struct {
	method, path string
	body         []byte
}

func newFailingDiscord(t *testing.T, mode, failOn string) *failingDiscord {
	f := &failingDiscord{mode: mode, failOn: failOn, stop: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/api/v9")
		if r.Method == "POST" || r.Method == "PATCH" {
			b, _ := io.ReadAll(r.Body)
			f.mu.Lock()
			f.bodies = append(f.bodies, sentBody{r.Method, p, b})
			f.mu.Unlock()
		}
		if f.failOn != "" && strings.Contains(p, f.failOn) {
			f.mu.Lock()
			f.failed++
			f.mu.Unlock()
			switch f.mode {
			case "drop":
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
			case "stall":
				select {
				case <-r.Context().Done():
				case <-f.stop:
				}
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "GET" && strings.HasSuffix(p, "/messages"):
			_, _ = w.Write([]byte(`[]`))
		case r.Method == "GET" && strings.HasPrefix(p, "/channels/"):
			id := strings.TrimPrefix(p, "/channels/")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "guild_id": "100", "type": 11, "parent_id": "500", "name": "t",
				"thread_metadata": map[string]any{"archived": false, "locked": false}})
		case r.Method == "POST" && strings.HasSuffix(p, "/callback"):
			w.WriteHeader(http.StatusNoContent)
		case r.Method == "GET" && strings.HasSuffix(p, "/messages/@original"):
			_, _ = w.Write([]byte(`{"id":"900","channel_id":"600","content":"x"}`))
		case r.Method == "POST":
			_, _ = w.Write([]byte(`{"id":"901","channel_id":"600","content":"x"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":0,"message":"404: Not Found"}`))
		}
	}))
	t.Cleanup(func() { close(f.stop); f.srv.Close() })
	return f
}

func (f *failingDiscord) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// TestRESTFailuresLeakNoSecret makes each REST path that carries a token
// in its URL (or any REST path, with the bot token in the header) fail with
// a network error and with a timeout, and greps every log line and every
// returned error for the bot, webhook and interaction tokens (invariant 14).
func TestRESTFailuresLeakNoSecret(t *testing.T) {
	paths := []struct {
		name   string
		failOn string // path fragment that fails
		run    func(ctx context.Context, c *Client, g *Gateway) error
		// reconciles: a dropped response is settled by reading @original
		// (the answer may be displayed), so the send succeeds silently.
		reconciles bool
	}{
		{"channel send", "/channels/600/messages", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d1", Target: c.ref("600", ""), Text: "hi"})
			return err
		}, false},
		{"webhook execute", "/webhooks/" + testHookID + "/", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d2", Target: c.ref("600", ""), Text: "hi", ViaWebhook: true,
				Persona: delivery.Persona{Name: "worker"}})
			return err
		}, false},
		{"interaction response", "/interactions/", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d3", Target: c.ref("600", ""), Text: "hi",
				Interaction: &delivery.Interaction{ID: "55", Token: secretInterToken}})
			return err
		}, true},
		{"interaction original", "/messages/@original", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d4", Target: c.ref("600", ""), Text: "hi",
				Interaction: &delivery.Interaction{ID: "56", Token: secretInterToken}})
			return err
		}, false},
		{"followup", "/webhooks/" + testAppID + "/" + secretInterToken, func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d5", Target: c.ref("600", ""), Text: strings.Repeat("a", MaxMessageLen+10),
				Interaction: &delivery.Interaction{ID: "57", Token: secretInterToken}})
			return err
		}, false},
		{"ephemeral command reply", "/interactions/", func(ctx context.Context, c *Client, g *Gateway) error {
			in := &discordgo.Interaction{ID: "58", Token: secretInterToken, AppID: testAppID}
			g.answer(ctx, invocation{in: in, name: "agents"}, reply{text: "hello"})
			return nil
		}, false},
	}
	for _, mode := range []string{"drop", "stall"} {
		for _, p := range paths {
			t.Run(mode+"/"+p.name, func(t *testing.T) {
				f := newFailingDiscord(t, mode, p.failOn)
				var logs bytes.Buffer
				c, g := wire(t, ClientOptions{Token: secretBotToken, APIURL: f.srv.URL, RetryBackoff: time.Millisecond},
					ClientDeps{Webhooks: memWebhooks{}, Log: zerolog.New(&logs)}, GatewayOptions{}, GatewayDeps{Bindings: &fakeBindings{}, Log: zerolog.New(&logs)})
				c.setIdentity("1", "", testAppID)
				timeout := 5 * time.Second
				if mode == "stall" {
					timeout = 300 * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				err := p.run(ctx, c, g)
				if f.failures() == 0 {
					t.Fatalf("no request to %s failed: the path under test was not reached", p.failOn)
				}
				text := logs.String()
				if err != nil {
					text += "\n" + err.Error()
				}
				if strings.TrimSpace(text) == "" && !(p.reconciles && mode == "drop") {
					t.Error("the failure was neither logged nor returned")
				}
				for _, s := range []string{secretBotToken, secretWebhookToken, secretInterToken} {
					if strings.Contains(text, s) {
						t.Errorf("secret %.12s... leaked:\n%s", s, text)
					}
				}
			})
		}
	}
}
