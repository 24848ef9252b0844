package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Config is what the adapter needs to reach the homeserver (the future config "matrix" section).
type Config struct {
	// HomeserverURL is the client-server API base (https://matrix.example.org).
	HomeserverURL string
	// UserID and AccessToken are the bot account's (AccessToken is a secret: never logged).
	UserID      string
	AccessToken string
	// AppService, when set, posts personas as appservice ghosts; without it a persona's name prefixes the text.
	AppService *AppServiceConfig
	// TimelineLimit is how many events per room one /sync returns at most (default 100). A room with more since
	// the saved token (a longer downtime) is filled in from /messages, up to MaxCatchUp events per room.
	TimelineLimit int
	// MaxCatchUp bounds that fill-in per room and batch (default 1000); what is older is not handled (a warning).
	MaxCatchUp int
	// SyncTimeout is the long-poll timeout of /sync (default 30s).
	SyncTimeout time.Duration
	// HTTPClient is used for every request (default: a client with a 90s timeout).
	HTTPClient *http.Client
}

// AppServiceConfig is the bot's appservice registration: its as_token and the exclusive user namespace of its
// persona ghosts (@<UserPrefix><name>:<ServerName>).
type AppServiceConfig struct {
	ASToken    string
	UserPrefix string
	ServerName string
	// SenderLocalpart is the appservice's own user (its events are the bot's too).
	SenderLocalpart string
}

// Handler receives classified inbound events, one at a time, in /sync order (rooms by id within a batch).
type Handler func(ctx context.Context, in Inbound)

// Client is the Matrix adapter's connection: /sync loop (Run) and sender (Send, CreateThread, Edit, Typing).
type Client struct {
	cfg    Config
	bot    *mautrix.Client
	tokens TokenStore
	log    zerolog.Logger
	class  Classifier

	ghostMu sync.Mutex
	ghosts  map[string]*ghost // by localpart; under ghostMu
}

// New returns a client for cfg; tokens keeps the /sync position.
func New(cfg Config, tokens TokenStore, log zerolog.Logger) (*Client, error) {
	if cfg.HomeserverURL == "" || cfg.UserID == "" || cfg.AccessToken == "" {
		return nil, errors.New("matrix: homeserver URL, user id and access token are required")
	}
	if tokens == nil {
		return nil, errors.New("matrix: a sync token store is required")
	}
	if cfg.TimelineLimit <= 0 {
		cfg.TimelineLimit = 100
	}
	if cfg.MaxCatchUp <= 0 {
		cfg.MaxCatchUp = 1000
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = 30 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.SyncTimeout + 60*time.Second}
	}
	bot, err := newMautrix(cfg, id.UserID(cfg.UserID), cfg.AccessToken)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, bot: bot, tokens: tokens, log: log.With().Str("adapter", "matrix").Logger(), ghosts: map[string]*ghost{}}
	c.class = Classifier{BotUserID: cfg.UserID, IsGhost: c.IsGhost}
	return c, nil
}

func newMautrix(cfg Config, user id.UserID, token string) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(cfg.HomeserverURL, user, token)
	if err != nil {
		return nil, fmt.Errorf("matrix: client for %s: %w", cfg.HomeserverURL, err)
	}
	cli.Client = cfg.HTTPClient
	cli.DefaultHTTPRetries = 3
	cli.Log = zerolog.Nop()
	return cli, nil
}

// UserID is the bot's user id.
func (c *Client) UserID() string { return c.cfg.UserID }

// IsGhost reports whether userID is one of the bot's appservice users (a persona ghost or the appservice sender).
func (c *Client) IsGhost(userID string) bool {
	as := c.cfg.AppService
	if as == nil {
		return false
	}
	local, server, ok := strings.Cut(strings.TrimPrefix(userID, "@"), ":")
	if !ok || !strings.HasPrefix(userID, "@") || server != as.ServerName {
		return false
	}
	return strings.HasPrefix(local, as.UserPrefix) || (as.SenderLocalpart != "" && local == as.SenderLocalpart)
}

// JoinRoom joins roomID (an id or alias) as the bot and returns the room id.
func (c *Client) JoinRoom(ctx context.Context, roomID string) (string, error) {
	resp, err := c.bot.JoinRoom(ctx, roomID, nil)
	if err != nil {
		return "", classify("matrix: join "+roomID, err)
	}
	return resp.RoomID.String(), nil
}

// syncFilter: per-room timelines of at most TimelineLimit events, no presence or account data.
func (c *Client) syncFilter() string {
	f := map[string]any{
		"room":         map[string]any{"timeline": map[string]any{"limit": c.cfg.TimelineLimit}, "account_data": map[string]any{"not_types": []string{"*"}}},
		"presence":     map[string]any{"not_types": []string{"*"}},
		"account_data": map[string]any{"not_types": []string{"*"}},
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// Run is the /sync loop: it resumes from the saved token, hands every classified event to h, and saves the next
// token after each batch. It returns nil when ctx ends, or an error when the token cannot be loaded or saved (the
// position would be lost: the caller decides whether to restart). Failed /sync requests are retried with backoff
// (1s doubling to 30s); a 401 (token revoked) is returned as an error.
func (c *Client) Run(ctx context.Context, h Handler) error {
	since, err := c.tokens.LoadSyncToken(ctx)
	if err != nil {
		return fmt.Errorf("matrix: sync: %w", err)
	}
	first := since == ""
	filter := c.syncFilter()
	backoff := time.Second
	for ctx.Err() == nil {
		timeout := c.cfg.SyncTimeout
		if first {
			timeout = 0
		}
		resp, err := c.bot.FullSyncRequest(ctx, mautrix.ReqSync{Since: since, Timeout: int(timeout / time.Millisecond), FilterID: filter})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			err = classify("matrix: sync", err)
			if errors.Is(err, ErrForbidden) {
				return err
			}
			c.log.Warn().Err(err).Dur("retry_in", backoff).Msg("sync failed")
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		// The batch is handled to its end and its token saved even if ctx ends meanwhile: a clean stop never
		// leaves a batch half handled.
		bctx := context.WithoutCancel(ctx)
		c.dispatch(bctx, resp, h, since)
		if err := c.tokens.SaveSyncToken(bctx, resp.NextBatch); err != nil {
			return fmt.Errorf("matrix: sync: %w", err)
		}
		since, first = resp.NextBatch, false
	}
	return nil
}

// dispatch hands a batch's events to h: invites, then each joined room's timeline (rooms sorted by id), a
// truncated one preceded by the events between since and the timeline (from /messages). On the first start
// (since "") the timelines are history from before the bot ran and are skipped.
func (c *Client) dispatch(ctx context.Context, resp *mautrix.RespSync, h Handler, since string) {
	for _, roomID := range sortedKeys(resp.Rooms.Invite) {
		in := Inbound{Kind: KindInvite, RoomID: roomID.String()}
		for _, ev := range resp.Rooms.Invite[roomID].State.Events {
			if ev.Type == event.StateMember && ev.StateKey != nil && *ev.StateKey == c.cfg.UserID {
				in.Sender = ev.Sender.String()
			}
		}
		if c.class.own(in.Sender) {
			continue
		}
		c.handle(ctx, h, in)
	}
	if since == "" {
		return
	}
	for _, roomID := range sortedKeys(resp.Rooms.Join) {
		room := resp.Rooms.Join[roomID]
		events := room.Timeline.Events
		if room.Timeline.Limited && room.Timeline.PrevBatch != "" {
			events = append(c.catchUp(ctx, roomID, room.Timeline.PrevBatch, since), events...)
		}
		seen := map[id.EventID]bool{}
		for _, ev := range events {
			if seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
			raw, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			in, ok := c.class.Classify(raw)
			if !ok {
				continue
			}
			in.RoomID = roomID.String()
			c.handle(ctx, h, in)
		}
	}
}

// catchUp returns the room's events between the sync token since and prevBatch (a truncated timeline's start),
// oldest first, at most MaxCatchUp of the newest ones. A failure is logged: the batch goes on with what it has.
func (c *Client) catchUp(ctx context.Context, roomID id.RoomID, prevBatch, since string) []*event.Event {
	var out []*event.Event
	from := prevBatch
	for len(out) < c.cfg.MaxCatchUp {
		resp, err := c.bot.Messages(ctx, roomID, from, since, mautrix.DirectionBackward, nil, min(100, c.cfg.MaxCatchUp-len(out)))
		if err != nil {
			c.log.Warn().Err(classify("matrix: catch-up", err)).Str("room", roomID.String()).Int("events", len(out)).Msg("sync catch-up incomplete: older events since the last run were not handled")
			break
		}
		out = append(out, resp.Chunk...)
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
		if len(out) >= c.cfg.MaxCatchUp {
			c.log.Warn().Str("room", roomID.String()).Int("max", c.cfg.MaxCatchUp).Msg("sync catch-up truncated: older events since the last run were not handled")
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func (c *Client) handle(ctx context.Context, h Handler, in Inbound) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Interface("panic", r).Str("room", in.RoomID).Str("event", in.EventID).Msg("inbound handler panicked")
		}
	}()
	h(ctx, in)
}

func sortedKeys[V any](m map[id.RoomID]V) []id.RoomID {
	out := make([]id.RoomID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
