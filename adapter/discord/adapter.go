package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/metrics"
)

// Intents the bot needs: guilds, guild messages, message content, DMs.
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentMessageContent | discordgo.IntentsDirectMessages

// Options configure the adapter.
type Options struct {
	Token          string
	APIURL         string
	Guilds         []string // allowlist; empty = all
	OperatorUsers  []string
	OperatorRoles  []string
	ThreadBindings bool
	AccountID      string // "" = "default"
	SweepInterval  time.Duration
	// Reconnect lets discordgo reconnect after gateway errors (true in production).
	Reconnect bool
	// BaseTransport is the HTTP transport under the rewriting one (tests).
	BaseTransport http.RoundTripper
	// RetryBackoff is the wait between retries of retryable send failures.
	RetryBackoff time.Duration
	// DrainTimeout bounds how long a stop waits for accepted events.
	DrainTimeout time.Duration
	// Shard is the gateway shard to serve (zero value: unsharded).
	Shard Shard
	// Sleep waits before an IDENTIFY (pacing, backoff, a spent budget);
	// nil = a real timer. Tests inject one that records and returns.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Sessions is what the adapter needs of core/session.Manager.
type Sessions interface {
	HandleMessage(ctx context.Context, msg session.Message) error
	Spawn(ctx context.Context, req session.SpawnRequest) (session.SpawnResult, error)
	Reset(ctx context.Context, conv binding.ConversationRef) (string, error)
	Sessions(keep func(session.Info) bool) []session.Info
	Info(key string) (session.Info, bool)
	DefaultAgent() session.Agent
	Watermarks() map[string]string
}

// Bindings is what the adapter needs of core/binding.Service.
type Bindings interface {
	ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool)
	Bind(ctx context.Context, in binding.BindInput) (binding.Record, error)
	Unbind(ctx context.Context, in binding.UnbindInput) ([]binding.Record, error)
	Active() []binding.Record
	ListBySession(key string) []binding.Record
	SetTimeouts(ctx context.Context, id string, idle, maxAge *time.Duration) (binding.Record, error)
	Touch(id string, at time.Time)
}

// Deliverer is the outbound send owner (core/delivery.Outbound).
type Deliverer interface {
	Deliver(ctx context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error)
	SessionFor(ref binding.ConversationRef) (string, binding.Record, bool)
}

// WebhookStore persists one webhook per parent channel.
type WebhookStore interface {
	PutWebhook(ctx context.Context, channelID, id, token string) error
	Webhook(ctx context.Context, channelID string) (id, token string, ok bool, err error)
	DeleteWebhook(ctx context.Context, channelID string) error
}

// Jobs is the scheduler surface behind /cron. Replies are user-facing
// text; errors are user-facing too (they say what to write instead).
type Jobs interface {
	Add(ctx context.Context, req CronAdd) (string, error)
	List(ctx context.Context, conv binding.ConversationRef) (string, error)
	Remove(ctx context.Context, id string) (string, error)
	RunNow(ctx context.Context, id string) (string, error)
	Runs(ctx context.Context, id string) (string, error)
}

// CronAdd is a /cron add invocation.
type CronAdd struct {
	Schedule, Prompt, Target, TZ, To string
	CreatedBy                        string
	CreatedIn                        binding.ConversationRef
}

// Deps are the adapter's collaborators. Jobs may be nil (scheduler off).
type Deps struct {
	Sessions Sessions
	Bindings Bindings
	Outbound Deliverer
	Webhooks WebhookStore
	Jobs     Jobs
	Metrics  *metrics.Metrics
	Clock    clock.Clock
	Log      zerolog.Logger
}

// Adapter connects the bot to Discord: the gateway and inbound routing,
// slash commands, the thread and webhook managers, and the outbound Sender.
// It is the only package that imports discordgo.
type Adapter struct {
	opt   Options
	d     Deps
	log   zerolog.Logger
	token tokenSource

	mu      sync.RWMutex
	s       *discordgo.Session
	ctx     context.Context
	ready   atomic.Bool
	appID   string
	botID   string
	botName string
	guilds  map[string]bool
	ops     map[string]bool
	opRoles map[string]bool

	hooks   *webhookManager
	threads *threadManager
	dms     sync.Map // user id -> DM channel id

	shard      Shard        // Count 0 until known (auto); guarded by mu
	identifies atomic.Int64 // connect attempts (see connect)

	events    *eventQueue
	stopping  atomic.Bool
	connected chan struct{}  // closed at the first READY
	wg        sync.WaitGroup // interaction goroutines
	trackMu   sync.Mutex     // orders goTracked's wg.Add before drain's wg.Wait
}

// Compile-time interface guards.
var (
	_ delivery.Sender = (*Adapter)(nil)
	_ session.Threads = (*Adapter)(nil)
)

// New returns an adapter. It does no I/O; Run connects.
func New(opt Options, d Deps) *Adapter {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if opt.SweepInterval <= 0 {
		opt.SweepInterval = 2 * time.Minute
	}
	if opt.RetryBackoff <= 0 {
		opt.RetryBackoff = 500 * time.Millisecond
	}
	if opt.DrainTimeout <= 0 {
		opt.DrainTimeout = 15 * time.Second
	}
	if opt.AccountID == "" {
		opt.AccountID = "default"
	}
	a := &Adapter{opt: opt, d: d, log: d.Log, guilds: set(opt.Guilds), ops: set(opt.OperatorUsers), opRoles: set(opt.OperatorRoles), ctx: context.Background()}
	a.token.Set(opt.Token)
	a.shard = Shard{ID: opt.Shard.ID}
	if !opt.Shard.Auto {
		a.shard.Count = max(opt.Shard.Count, 1)
	}
	a.connected = make(chan struct{})
	a.hooks = &webhookManager{a: a, cache: map[string]webhookCreds{}}
	a.threads = &threadManager{a: a}
	return a
}

func set(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// SetDeps sets the collaborators; the adapter and Outbound refer to each
// other (the adapter is Outbound's Sender), so wiring sets them after New.
// Call before Run.
func (a *Adapter) SetDeps(d Deps) {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	a.d, a.log = d, d.Log
}

// SetToken rotates the bot token (config reload). Every later REST call,
// including those of the reused thread and webhook managers, uses it.
func (a *Adapter) SetToken(tok string) { a.token.Set(tok) }

// Connected is closed once the first gateway session is ready.
func (a *Adapter) Connected() <-chan struct{} { return a.connected }

// Ready reports whether the gateway session is ready.
func (a *Adapter) Ready() bool { return a.ready.Load() }

func (a *Adapter) session() *discordgo.Session {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.s
}

// ref builds a conversation ref on this account.
func (a *Adapter) ref(conversationID, parentID string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: a.opt.AccountID, ConversationID: conversationID, ParentConversationID: parentID}.Normalize()
}

// Run connects to the gateway, registers slash commands, serves events
// until ctx ends, then closes the session.
func (a *Adapter) Run(ctx context.Context) error {
	s, err := a.newSession()
	if err != nil {
		return err
	}
	readyCh := make(chan struct{}, 1)
	a.mu.Lock()
	a.s, a.ctx = s, ctx
	a.mu.Unlock()
	a.events = newEventQueue(a)
	defer a.events.close() // every return path ends the worker (drain closes it first)
	a.register(s, readyCh)
	if err := a.connect(ctx, s); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		a.ready.Store(false)
		if err := s.Close(); err != nil {
			a.log.Warn().Err(err).Msg("discord: close gateway")
		}
	}()
	select {
	case <-readyCh:
		close(a.connected)
	case <-ctx.Done():
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("discord: gateway did not send READY within 30s")
	}
	if err := a.registerCommands(ctx); err != nil {
		return err
	}
	t := time.NewTicker(a.opt.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return a.drain()
		case <-t.C:
			a.Sweep(ctx)
		}
	}
}

// drain stops taking events and waits (bounded) for accepted ones.
func (a *Adapter) drain() error {
	a.trackMu.Lock()
	a.stopping.Store(true) // no wg.Add after this: Wait below may start
	a.trackMu.Unlock()
	a.events.close()
	done := make(chan struct{})
	go func() { a.events.wait(); a.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(a.opt.DrainTimeout):
		return fmt.Errorf("discord: %w: in-flight events did not finish in %s", context.DeadlineExceeded, a.opt.DrainTimeout)
	}
}

func (a *Adapter) newSession() (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + a.token.Get())
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	tr, err := newTransport(a.opt.APIURL, &a.token, a.opt.BaseTransport)
	if err != nil {
		return nil, err
	}
	s.Client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	s.Identify.Intents = Intents
	s.ShouldReconnectOnError = a.opt.Reconnect
	if sh := a.shard; sh.Count > 1 { // auto: set by fixShard before the first Open
		s.ShardID, s.ShardCount = sh.ID, sh.Count
	}
	s.StateEnabled = true
	s.LogLevel = discordgo.LogError
	return s, nil
}

// register installs every gateway handler in one place. discordgo runs
// them inline (SyncEvents) so they see events in gateway order; each only
// queues its event: messages and thread changes go through one ordered
// queue (a conversation's messages are handled in the order Discord sent
// them), interactions run on their own goroutine (Discord wants an answer
// within 3 s). Every handler and every worker runs under a recover.
func (a *Adapter) register(s *discordgo.Session, readyCh chan struct{}) {
	s.SyncEvents = true
	s.AddHandler(func(s *discordgo.Session, r *discordgo.Ready) {
		defer a.recoverHandler("ready")
		a.mu.Lock()
		a.botID, a.botName = r.User.ID, r.User.Username
		if r.Application != nil {
			a.appID = r.Application.ID
		}
		a.mu.Unlock()
		// Inline, before any later event: queue what was missed while down.
		a.catchUp(s)
		a.ready.Store(true)
		select {
		case readyCh <- struct{}{}:
		default:
		}
	})
	s.AddHandler(func(s *discordgo.Session, _ *discordgo.Resumed) {
		defer a.recoverHandler("resumed")
		a.ready.Store(true)
	})
	s.AddHandler(func(s *discordgo.Session, _ *discordgo.Disconnect) {
		defer a.recoverHandler("disconnect")
		a.ready.Store(false)
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageCreate) {
		defer a.recoverHandler("message_create")
		a.events.push("message_create", func(ctx context.Context) { a.onMessage(ctx, m.Message) })
	})
	s.AddHandler(func(s *discordgo.Session, t *discordgo.ThreadUpdate) {
		defer a.recoverHandler("thread_update")
		a.events.push("thread_update", func(ctx context.Context) { a.onThreadState(ctx, t.Channel) })
	})
	s.AddHandler(func(s *discordgo.Session, t *discordgo.ThreadDelete) {
		defer a.recoverHandler("thread_delete")
		a.events.push("thread_delete", func(ctx context.Context) { a.onGone(ctx, t.Channel.ID) })
	})
	s.AddHandler(func(s *discordgo.Session, c *discordgo.ChannelDelete) {
		defer a.recoverHandler("channel_delete")
		a.events.push("channel_delete", func(ctx context.Context) { a.onGone(ctx, c.Channel.ID) })
	})
	s.AddHandler(func(s *discordgo.Session, _ *discordgo.RateLimit) {
		// discordgo waits out 429s itself and returns no error; count them here.
		defer a.recoverHandler("rate_limit")
		a.d.Metrics.RESTError(0, http.StatusTooManyRequests)
	})
	s.AddHandler(func(s *discordgo.Session, i *discordgo.InteractionCreate) {
		defer a.recoverHandler("interaction_create")
		a.goTracked("interaction_create", func(ctx context.Context) { a.onInteraction(ctx, i.Interaction) })
	})
}

// workCtx is the context of event work: it outlives Run's context, so work
// already accepted finishes during a graceful stop (bounded by Run).
func (a *Adapter) workCtx() context.Context { return context.WithoutCancel(a.runCtx()) }

// goTracked runs f on its own goroutine under a recover; Run waits for it.
func (a *Adapter) goTracked(name string, f func(context.Context)) {
	a.trackMu.Lock()
	if a.stopping.Load() {
		a.trackMu.Unlock()
		return
	}
	a.wg.Add(1)
	a.trackMu.Unlock()
	go func() {
		defer a.wg.Done()
		defer a.recoverHandler(name)
		f(a.workCtx())
	}()
}

func (a *Adapter) recoverHandler(name string) {
	if r := recover(); r != nil {
		a.log.Error().Str("handler", name).Interface("panic", r).Msg("discord handler panicked")
	}
}

func (a *Adapter) runCtx() context.Context {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.ctx
}

func (a *Adapter) ids() (bot, app string) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.botID, a.appID
}
