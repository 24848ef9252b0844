package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// Options are what a Client needs to reach the homeserver (the future config "matrix" section).
type Options struct {
	// HomeserverURL is the client-server API base (https://matrix.example.org).
	HomeserverURL string
	// UserID and AccessToken are the bot account's (AccessToken is a secret: never logged).
	UserID      string
	AccessToken string
	// AppService, when set, posts personas as appservice ghosts; without it a persona's name prefixes the text.
	AppService *AppServiceConfig
	// SyncTimeout is the long-poll timeout of /sync (default 30s); the default HTTP client's timeout is sized for
	// it.
	SyncTimeout time.Duration
}

// Deps are what a Client works with.
type Deps struct {
	// HTTPClient is used for every request (default: a client with a timeout of SyncTimeout plus 60s).
	HTTPClient *http.Client
	Log        zerolog.Logger
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

// Client is the Matrix adapter's connection to the homeserver: the sender (Send, CreateThread, Edit, Typing) and
// what the /sync loop (Sync) reads through.
type Client struct {
	opt   Options
	http  *http.Client // the bot's and every ghost's requests
	bot   *mautrix.Client
	log   zerolog.Logger
	class Classifier

	ghostMu sync.Mutex
	ghosts  map[string]*ghost // by localpart; under ghostMu

	dmMu sync.Mutex
	dms  dmState // the bot's m.direct; under dmMu

	typingMu sync.Mutex
	typing   map[string]time.Time // room -> until when the bot's typing notice shows; under typingMu

	known knownEvents // events known to be of their room (thread roots, invariant 18)
}

// New returns a client for the bot account. It does no I/O.
func New(opt Options, d Deps) (*Client, error) {
	if opt.HomeserverURL == "" || opt.UserID == "" || opt.AccessToken == "" {
		return nil, errors.New("matrix: homeserver URL, user id and access token are required")
	}
	if opt.SyncTimeout <= 0 {
		opt.SyncTimeout = 30 * time.Second
	}
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{Timeout: opt.SyncTimeout + 60*time.Second}
	}
	bot, err := newMautrix(opt.HomeserverURL, d.HTTPClient, id.UserID(opt.UserID), opt.AccessToken)
	if err != nil {
		return nil, err
	}
	c := &Client{opt: opt, http: d.HTTPClient, bot: bot, log: d.Log.With().Str("adapter", "matrix").Logger(), ghosts: map[string]*ghost{}, typing: map[string]time.Time{}}
	c.class = Classifier{BotUserID: opt.UserID, IsGhost: c.IsGhost}
	return c, nil
}

func newMautrix(homeserver string, hc *http.Client, user id.UserID, token string) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(homeserver, user, token)
	if err != nil {
		return nil, fmt.Errorf("matrix: client for %s: %w", homeserver, err)
	}
	cli.Client = hc
	cli.DefaultHTTPRetries = 3
	cli.Log = zerolog.Nop()
	return cli, nil
}

// UserID is the bot's user id.
func (c *Client) UserID() string { return c.opt.UserID }

// IsGhost reports whether userID is one of the bot's appservice users (a persona ghost or the appservice sender).
func (c *Client) IsGhost(userID string) bool {
	as := c.opt.AppService
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
