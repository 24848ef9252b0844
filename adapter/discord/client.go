package discord

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/metrics"
)

// Intents the bot needs: guilds, guild messages, message content, DMs.
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentMessageContent | discordgo.IntentsDirectMessages

// ClientOptions configure the Client.
type ClientOptions struct {
	Token     string
	APIURL    string
	Guilds    []string // allowlist; empty = all
	AccountID string   // "" = "default"
	// BaseTransport is the HTTP transport under the rewriting one (tests).
	BaseTransport http.RoundTripper
	// RetryBackoff is the wait between retries of retryable send failures.
	RetryBackoff time.Duration
	// Confirmed are message ids confirmed for earlier deliveries (by a
	// previous process): reconciling an ambiguous send never takes them for
	// another delivery's.
	Confirmed []string
}

// WebhookStore persists one webhook per parent channel.
type WebhookStore interface {
	PutWebhook(ctx context.Context, channelID, id, token string) error
	Webhook(ctx context.Context, channelID string) (id, token string, ok bool, err error)
	DeleteWebhook(ctx context.Context, channelID string) error
}

// ClientDeps are the Client's collaborators (all optional).
type ClientDeps struct {
	Webhooks WebhookStore
	Metrics  *metrics.Metrics
	Clock    clock.Clock
	Log      zerolog.Logger
}

// Client is the REST side of the adapter: sends (channel messages,
// webhooks, interaction answers, live posts and edits) with their retries
// and idempotency, threads, webhooks, typing, attachments, membership
// lookups (the authority's Directory for Discord conversations), and the
// token. It is core/delivery's
// Sender and core/session's Threads, Typist and Fetcher. It knows nothing
// of the Gateway, which connects the Client's session to Discord's gateway
// (filling its state cache) and tells it the bot's identity at READY.
type Client struct {
	opt   ClientOptions
	d     ClientDeps
	log   zerolog.Logger
	token tokenSource

	mu      sync.RWMutex
	s       *discordgo.Session
	appID   string
	botID   string
	botName string
	guilds  map[string]bool

	hooks      *webhookManager
	threads    *threadManager
	dms        sync.Map // user id -> DM channel id
	members    sync.Map // guild id "/" user id -> when Discord last reported the member (see memberTTL)
	nonMembers sync.Map // guild id "/" user id -> when Discord said "Unknown Member"
	claimed    claimedIDs
	rotated    chan struct{} // SetToken changed the token: the gateway re-identifies (see rotate.go)
}

// Compile-time interface guards.
var (
	_ delivery.Sender     = (*Client)(nil)
	_ delivery.LiveSender = (*Client)(nil)
	_ session.Threads     = (*Client)(nil)
	_ authz.Directory     = (*Client)(nil)
)

// NewClient returns a client. It does no I/O (REST calls are made as
// needed); it fails only on a malformed API URL.
func NewClient(opt ClientOptions, d ClientDeps) (*Client, error) {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if opt.RetryBackoff <= 0 {
		opt.RetryBackoff = 500 * time.Millisecond
	}
	if opt.AccountID == "" {
		opt.AccountID = "default"
	}
	c := &Client{opt: opt, d: d, log: d.Log, guilds: set(opt.Guilds), rotated: make(chan struct{}, 1)}
	c.claimed.add(opt.Confirmed...)
	c.token.Set(opt.Token)
	s, err := c.newSession()
	if err != nil {
		return nil, err
	}
	c.s = s
	c.hooks = &webhookManager{c: c, cache: map[string]webhookCreds{}}
	c.threads = &threadManager{c: c}
	return c, nil
}

func set(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// SetToken rotates the bot token (config reload). Every later REST call,
// including those of the thread and webhook managers, uses it, and a
// running Gateway re-identifies with it (rotate.go).
func (c *Client) SetToken(tok string) {
	if tok == c.token.Get() {
		return
	}
	c.token.Set(tok)
	select {
	case c.rotated <- struct{}{}:
	default: // a rotation is already due: it reads the newest token
	}
}

// session is the session REST calls use (never nil).
func (c *Client) session() *discordgo.Session {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s
}

// setSession makes s the session REST calls use (a rotated gateway's).
func (c *Client) setSession(s *discordgo.Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s = s
}

// setIdentity records who the bot is (the gateway's READY).
func (c *Client) setIdentity(botID, botName, appID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.botID, c.botName = botID, botName
	if appID != "" {
		c.appID = appID
	}
}

func (c *Client) ids() (bot, app string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.botID, c.appID
}

// ref builds a conversation ref on this account.
func (c *Client) ref(conversationID, parentID string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: c.opt.AccountID, ConversationID: conversationID, ParentConversationID: parentID}.Normalize()
}

func (c *Client) newSession() (*discordgo.Session, error) {
	return c.newSessionWith(c.token.Get())
}

// newSessionWith builds a session that identifies with tok (REST calls
// carry the newest token whatever tok is: see transport). The Gateway
// prepares it for the gateway connection.
func (c *Client) newSessionWith(tok string) (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + tok)
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	tr, err := newTransport(c.opt.APIURL, &c.token, c.opt.BaseTransport)
	if err != nil {
		return nil, err
	}
	s.Client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	s.StateEnabled = true
	s.LogLevel = discordgo.LogError
	return s, nil
}
