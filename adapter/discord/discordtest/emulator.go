package discordtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// DefaultToken is the bot token the emulator accepts when Options.Token is empty.
const DefaultToken = "test-token"

// discordEpoch is the Discord snowflake epoch in Unix milliseconds.
const discordEpoch = 1420070400000

// Options configures an Emulator. The zero value is usable.
type Options struct {
	// Token is the bot token (without the "Bot " prefix). Default DefaultToken.
	Token string
	// BotName is the bot user's username. Default "agentbot".
	BotName string
	// HeartbeatInterval announced in HELLO. Default 41.25 s.
	HeartbeatInterval time.Duration
	// Now is the clock used for timestamps, snowflakes and rate-limit windows. Default time.Now.
	Now func() time.Time
	// RateLimits configures per-route buckets. Routes without one are never limited.
	RateLimits []RateLimit
	// GlobalLimit is the number of requests per GlobalWindow (default 1 s) across all routes
	// except interaction callbacks. Zero disables the global limit.
	GlobalLimit  int
	GlobalWindow time.Duration
	// Logf, when set, receives diagnostic lines (unhandled routes, gateway lifecycle).
	Logf func(format string, args ...any)
	// DisableReferee turns off the OpenAPI check of every request.
	DisableReferee bool
	// Shards is the recommended shard count GET /gateway/bot returns. Default 1.
	Shards int
	// SessionStartLimit is GET /gateway/bot's session_start_limit; every IDENTIFY takes one from
	// Remaining. Zero fields take defaults: Total 1000, Remaining Total, ResetAfter 24h,
	// MaxConcurrency 1.
	SessionStartLimit SessionStartLimit
	// InteractionDeadline is how long after an interaction was created its callback is accepted;
	// later callbacks fail with 404 / 10062 "Unknown interaction", as on Discord. Default 3 s.
	InteractionDeadline time.Duration
	// InteractionTokenTTL is how long an interaction token works for followups and @original
	// reads, edits and deletes; later calls fail with 401 / 50027. Default 15 minutes.
	InteractionTokenTTL time.Duration
	// NonceWindow is how long enforce_nonce dedupes a message nonce; later the same nonce posts a
	// new message (Discord honours nonces for only a few minutes). Default 5 minutes.
	NonceWindow time.Duration
	// ApplicationFlags are the application's flags (GET /applications/@me, READY); they decide
	// which privileged intents IDENTIFY may ask for. Zero means DefaultApplicationFlags (Message
	// Content switched on in the portal); SetApplicationFlags(0) turns every one off.
	ApplicationFlags int
}

// SessionStartLimit is Discord's identify budget (GET /gateway/bot).
type SessionStartLimit struct {
	Total          int
	Remaining      int
	ResetAfter     time.Duration
	MaxConcurrency int
}

// Emulator is an in-process Discord: REST under /api/v9 and a websocket gateway,
// both on one loopback listener. Create it with New, then Start it.
type Emulator struct {
	opts     Options
	botUser  User
	appID    string
	appOwner User
	upgrader websocket.Upgrader
	rtab     []route

	srv      *http.Server
	ln       net.Listener
	baseURL  string
	serveErr chan error

	mu       sync.Mutex // guards everything below
	changed  chan struct{}
	lastID   int64
	world    world
	sessions map[string]*gwSession
	conns    map[*gwConn]struct{}
	noAck    bool
	gw       gwCounters
	startLim SessionStartLimit
	requests []Request
	faults   []*faultState
	limits   rateLimiter
	referee  []Violation
	closed   bool
	appFlags int

	// tokens are the bot tokens accepted now (REST, IDENTIFY, RESUME);
	// Options.Token at start, replaced by SetTokens (a token reset).
	tokMu   sync.RWMutex
	tokens  []string
	fetches map[string]int // attachment path -> GETs
}

// New builds an emulator that is not yet listening. Seed the world, then call Start.
func New(opts Options) *Emulator {
	if opts.Token == "" {
		opts.Token = DefaultToken
	}
	if opts.BotName == "" {
		opts.BotName = "agentbot"
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 41250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.GlobalWindow <= 0 {
		opts.GlobalWindow = time.Second
	}
	if opts.InteractionDeadline <= 0 {
		opts.InteractionDeadline = 3 * time.Second
	}
	if opts.InteractionTokenTTL <= 0 {
		opts.InteractionTokenTTL = 15 * time.Minute
	}
	if opts.NonceWindow <= 0 {
		opts.NonceWindow = 5 * time.Minute
	}
	if opts.Shards <= 0 {
		opts.Shards = 1
	}
	l := &opts.SessionStartLimit
	if l.Total <= 0 {
		l.Total = 1000
	}
	if l.Remaining <= 0 {
		l.Remaining = l.Total
	}
	if l.ResetAfter <= 0 {
		l.ResetAfter = 24 * time.Hour
	}
	if l.MaxConcurrency <= 0 {
		l.MaxConcurrency = 1
	}
	e := &Emulator{
		opts:     opts,
		changed:  make(chan struct{}),
		sessions: map[string]*gwSession{},
		conns:    map[*gwConn]struct{}{},
		upgrader: websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		tokens:   []string{opts.Token},
		fetches:  map[string]int{},
	}
	e.world = newWorld()
	e.startLim = opts.SessionStartLimit
	e.limits = newRateLimiter(opts.RateLimits, opts.GlobalLimit, opts.GlobalWindow)
	e.appID = e.nextIDLocked()
	e.botUser = User{ID: e.appID, Username: opts.BotName, Bot: true}
	e.world.users[e.botUser.ID] = e.botUser
	e.world.botID = e.botUser.ID
	e.appOwner = User{ID: e.nextIDLocked(), Username: opts.BotName + "-developer"}
	e.world.users[e.appOwner.ID] = e.appOwner
	e.appFlags = opts.ApplicationFlags
	if e.appFlags == 0 {
		e.appFlags = DefaultApplicationFlags
	}
	e.rtab = e.buildRoutes()
	return e
}

// Start listens on 127.0.0.1 with an ephemeral port and serves REST and gateway.
func (e *Emulator) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("discordtest: listen: %w", err)
	}
	e.ln = ln
	e.baseURL = "http://" + ln.Addr().String()
	e.srv = &http.Server{Handler: http.HandlerFunc(e.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	e.serveErr = make(chan error, 1)
	go func() { e.serveErr <- e.srv.Serve(ln) }()
	return nil
}

// Close stops the listener and drops every gateway connection. Safe to call twice.
func (e *Emulator) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	conns := make([]*gwConn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.broadcastLocked()
	e.mu.Unlock()
	for _, c := range conns {
		c.drop()
	}
	if e.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = e.srv.Close()
	}
	if serr := <-e.serveErr; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// URL is the emulator's base URL, "http://127.0.0.1:PORT". REST lives under URL()+"/api/v9/".
func (e *Emulator) URL() string { return e.baseURL }

// GatewayURL is the websocket URL returned by GET /api/v9/gateway.
func (e *Emulator) GatewayURL() string {
	return "ws" + strings.TrimPrefix(e.baseURL, "http") + "/gateway"
}

// Token is the bot token (without "Bot ") the emulator accepts (the first,
// when SetTokens gave several).
func (e *Emulator) Token() string {
	e.tokMu.RLock()
	defer e.tokMu.RUnlock()
	return e.tokens[0]
}

// SetTokens replaces the bot tokens the emulator accepts, like a token
// reset in the developer portal: from now on every REST call, IDENTIFY and
// RESUME must carry one of them (others get 401 / close 4004). Connections
// that already identified stay up, so a bot that never re-identifies
// notices only at its next reconnect, when its resume is refused.
func (e *Emulator) SetTokens(valid ...string) {
	if len(valid) == 0 {
		panic("discordtest: SetTokens needs at least one token")
	}
	e.tokMu.Lock()
	e.tokens = slices.Clone(valid)
	e.tokMu.Unlock()
}

// BotUserID is the bot's user id; it equals ApplicationID, as for real bots.
func (e *Emulator) BotUserID() string { return e.botUser.ID }

// BotUser returns the bot's user object.
func (e *Emulator) BotUser() User { return e.botUser }

// ApplicationID is the bot application's id.
func (e *Emulator) ApplicationID() string { return e.appID }

// Transport returns a RoundTripper that sends https://discord.com/... (any host) requests to the emulator,
// keeping the path. It does not touch discordgo's globals.
func (e *Emulator) Transport() http.RoundTripper {
	return rewriteTransport{host: strings.TrimPrefix(e.baseURL, "http://"), next: http.DefaultTransport}
}

// HTTPClient returns an http.Client using Transport, with a 20 s timeout like discordgo's default.
func (e *Emulator) HTTPClient() *http.Client {
	return &http.Client{Transport: e.Transport(), Timeout: 20 * time.Second}
}

// NewSession returns an unopened discordgo Session wired to the emulator: bot token, rewriting client,
// ShouldReconnectOnError=false and intents Guilds|GuildMessages|DirectMessages|MessageContent.
// Change fields before Open, never after.
func (e *Emulator) NewSession() (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + e.Token())
	if err != nil {
		return nil, err
	}
	s.Client = e.HTTPClient()
	s.ShouldReconnectOnError = false
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
		discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent
	return s, nil
}

type rewriteTransport struct {
	host string
	next http.RoundTripper
}

func (rt rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r2 := r.Clone(r.Context())
	r2.URL.Scheme = "http"
	r2.URL.Host = rt.host
	r2.Host = rt.host
	return rt.next.RoundTrip(r2)
}

// nextIDLocked returns a snowflake-like id, strictly increasing. Caller holds e.mu (or owns e).
func (e *Emulator) nextIDLocked() string {
	ms := e.opts.Now().UnixMilli() - discordEpoch
	if ms < 0 {
		ms = 0
	}
	id := ms << 22
	if id <= e.lastID {
		id = e.lastID + 1
	}
	e.lastID = id
	return fmt.Sprint(id)
}

// broadcastLocked wakes every waiter. Caller holds e.mu.
func (e *Emulator) broadcastLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *Emulator) logf(format string, args ...any) {
	if e.opts.Logf != nil {
		e.opts.Logf(format, args...)
	}
}

// Wait blocks until cond returns true or ctx ends. cond is re-evaluated after every state change
// (request, gateway frame, world mutation); it may call the Emulator's read methods.
func (e *Emulator) Wait(ctx context.Context, cond func() bool) error {
	for {
		e.mu.Lock()
		ch := e.changed
		closed := e.closed
		e.mu.Unlock()
		if cond() {
			return nil
		}
		if closed {
			return errors.New("discordtest: emulator closed")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// TB is the subset of testing.TB the helpers need (kept as an interface so this package
// does not import testing).
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	Logf(format string, args ...any)
}

// NewTest starts an emulator for a test. On cleanup it closes the emulator and fails the test
// if the OpenAPI referee recorded any violation. Seed the world with the returned emulator;
// seeding after sessions connect emits the matching gateway events.
func NewTest(tb TB, opts Options) *Emulator {
	tb.Helper()
	e := New(opts)
	if err := e.Start(); err != nil {
		tb.Fatalf("discordtest: %v", err)
	}
	tb.Cleanup(func() {
		_ = e.Close()
		for _, v := range e.Violations() {
			tb.Errorf("discordtest: API violation: %s", v)
		}
	})
	return e
}
