package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/delivery"
)

// TestEveryPayloadKindCarriesNoMentions: each kind of message-creating
// request the adapter makes carries allowed_mentions {"parse": []} with no
// roles or users and replied_user false (invariant 12). The adapter has no
// message-edit path today; the emulator rejects an edit without
// allowed_mentions (discordtest TestMentionsRequired).
func TestEveryPayloadKindCarriesNoMentions(t *testing.T) {
	long := strings.Repeat("a", MaxMessageLen) + "tail"
	kinds := []struct {
		name  string
		route string // path fragment of the request under test
		run   func(ctx context.Context, c *Client, g *Gateway) error
	}{
		{"channel send", "/channels/600/messages", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d1", Target: c.ref("600", ""), Text: "hi @everyone <@&5> <@7>"})
			return err
		}},
		{"channel reply", "/channels/600/messages", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d1r", Target: c.ref("600", ""), Text: "hi", ReplyTo: "123"})
			return err
		}},
		{"webhook execute", "/webhooks/" + testHookID + "/", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d2", Target: c.ref("600", ""), Text: "hi @here", ViaWebhook: true,
				Persona: delivery.Persona{Name: "worker"}})
			return err
		}},
		{"interaction response", "/callback", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d3", Target: c.ref("600", ""), Text: "hi @everyone",
				Interaction: &delivery.Interaction{ID: "55", Token: secretInterToken}})
			return err
		}},
		{"followup", "/webhooks/" + testAppID + "/", func(ctx context.Context, c *Client, g *Gateway) error {
			_, err := c.Send(ctx, delivery.Delivery{ID: "d5", Target: c.ref("600", ""), Text: long,
				Interaction: &delivery.Interaction{ID: "57", Token: secretInterToken}})
			return err
		}},
		{"ephemeral command reply", "/callback", func(ctx context.Context, c *Client, g *Gateway) error {
			in := &discordgo.Interaction{ID: "58", Token: secretInterToken, AppID: testAppID}
			g.answer(ctx, invocation{in: in, name: "agents"}, reply{text: "hello @everyone"})
			return nil
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			f := newFailingDiscord(t, "", "")
			c, g := wire(t, ClientOptions{Token: secretBotToken, APIURL: f.srv.URL, RetryBackoff: time.Millisecond},
				ClientDeps{Webhooks: memWebhooks{}, Log: zerolog.Nop()}, GatewayOptions{}, GatewayDeps{Bindings: &fakeBindings{}, Log: zerolog.Nop()})
			c.setIdentity("1", "", testAppID)
			if err := k.run(context.Background(), c, g); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			bodies := append([]sentBody(nil), f.bodies...)
			f.mu.Unlock()
			seen := 0
			for _, b := range bodies {
				if !strings.Contains(b.path, k.route) {
					continue
				}
				seen++
				var body struct {
					AllowedMentions *allowedMentionsWire `json:"allowed_mentions"`
					Data            *struct {
						AllowedMentions *allowedMentionsWire `json:"allowed_mentions"`
					} `json:"data"`
				}
				if err := json.Unmarshal(b.body, &body); err != nil {
					t.Fatalf("%s %s: %v", b.method, b.path, err)
				}
				am := body.AllowedMentions
				if body.Data != nil { // interaction callback
					am = body.Data.AllowedMentions
				}
				if am == nil || am.Parse == nil || len(*am.Parse) != 0 || len(am.Roles) != 0 || len(am.Users) != 0 || am.RepliedUser {
					t.Errorf("%s %s: allowed_mentions %s, want {\"parse\":[]} and replied_user false", b.method, b.path, b.body)
				}
			}
			if seen == 0 {
				t.Fatalf("no request to %s in %d requests", k.route, len(bodies))
			}
		})
	}
}

type allowedMentionsWire struct {
	Parse       *[]string `json:"parse"`
	Roles       []string  `json:"roles"`
	Users       []string  `json:"users"`
	RepliedUser bool      `json:"replied_user"`
}
