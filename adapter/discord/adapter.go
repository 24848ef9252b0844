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

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/internal/work"
	"github.com/agentbot/agentbot/metrics"
)

// Intents the bot needs: guilds, guild messages, message content, DMs.
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentMessageContent | discordgo.IntentsDirectMessages

// Options configure the adapter.
type Options struct {
	Token         string
	APIURL        string
	Guilds        []string // allowlist; empty = all
	OperatorUsers []string
	OperatorRoles []string
	// Access is discord.access (who may start turns); Limits its rateLimit.
	Access         authz.Policy
	Limits         authz.Limits
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
	// ReprocessEdits is discord.edits: reprocess (an edit of an answered
	// message addressed to the bot is answered again); false is history.
	ReprocessEdits bool
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
	Running(key string) (session.Run, bool)
	Stop(run session.Run) bool
	// MessageDeleted cancels the turn a deleted message started (nothing
	// is posted); MessageEdited runs an edited message's turn again on the
	// new text when its model call has not returned yet; Reanswer queues a
	// new turn for an edited message already answered (discord.edits:
	// reprocess). Each reports whether it found (or queued) a turn.
	MessageDeleted(ctx context.Context, messageID string) bool
	MessageEdited(messageID string) bool
	Reanswer(ctx context.Context, msg session.Message, editKey string) (bool, error)
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
	// WithConversation runs fn under the conversation's send lock.
	WithConversation(ref binding.ConversationRef, fn func() error) error
}

// WebhookStore persists one webhook per parent channel.
type WebhookStore interface {
	PutWebhook(ctx context.Context, channelID, id, token string) error
	Webhook(ctx context.Context, channelID string) (id, token string, ok bool, err error)
	DeleteWebhook(ctx context.Context, channelID string) error
}

// Jobs is the scheduler surface behind /cron. Replies are user-facing
// text; errors are user-facing too (they say what to write instead). Each
// call carries the invoker: Jobs applies the authority rule (core/authz),
// the same one the model's job tools go through.
type Jobs interface {
	Add(ctx context.Context, actor authz.Actor, req CronAdd) (string, error)
	List(ctx context.Context, actor authz.Actor) (string, error)
	Remove(ctx context.Context, actor authz.Actor, id string) (string, error)
	RunNow(ctx context.Context, actor authz.Actor, id string) (string, error)
	Runs(ctx context.Context, actor authz.Actor, id string) (string, error)
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
	// Changes records edits and deletions (nil: ignored).
	Changes ChatChanges
	// ACP runs external coding agents bound to threads (nil: none configured).
	ACP     ACP
	Metrics *metrics.Metrics
	Clock   clock.Clock
	Log     zerolog.Logger
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
	auth    *authz.Authority
	limiter *authz.Limiter

	hooks      *webhookManager
	threads    *threadManager
	dms        sync.Map // user id -> DM channel id
	members    sync.Map // guild id "/" user id -> when Discord last reported the member (see memberTTL)
	nonMembers sync.Map // guild id "/" user id -> when Discord said "Unknown Member"
	claimed    claimedIDs

	shard      Shard        // Count 0 until known (auto); guarded by mu
	identifies atomic.Int64 // connect attempts (see connect)

	events *eventQueue
	// What catchUp found at the last READY, for catchUpGuild; guarded by mu.
	catchUpMarks   map[string]string
	catchUpFloor   string
	guildsCaughtUp map[string]bool
	work           work.Group    // interaction goroutines; closed by drain
	connected      chan struct{} // closed at the first READY
	rotated        chan struct{} // SetToken changed the token: re-identify (see rotate.go)
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
	a := &Adapter{opt: opt, d: d, log: d.Log, guilds: set(opt.Guilds), ctx: context.Background()}
	a.auth = authz.New(authz.Config{OperatorUsers: opt.OperatorUsers, OperatorRoles: opt.OperatorRoles}, a)
	a.limiter = authz.NewLimiter(opt.Limits, d.Clock)
	a.token.Set(opt.Token)
	a.shard = Shard{ID: opt.Shard.ID}
	if !opt.Shard.Auto {
		a.shard.Count = max(opt.Shard.Count, 1)
	}
	a.connected = make(chan struct{})
	a.rotated = make(chan struct{}, 1)
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
	a.limiter = authz.NewLimiter(a.opt.Limits, d.Clock)
}

// Authority is the one authority rule (invariant 13) over this adapter's
// view of Discord: slash commands use it, and the wiring hands it to the
// model's tools and the scheduler, so both decide alike.
func (a *Adapter) Authority() *authz.Authority { return a.auth }

// SetToken rotates the bot token (config reload). Every later REST call,
// including those of the reused thread and webhook managers, uses it, and
// the running adapter re-identifies the gateway with it (rotate.go).
func (a *Adapter) SetToken(tok string) {
	if tok == a.token.Get() {
		return
	}
	a.token.Set(tok)
	select {
	case a.rotated <- struct{}{}:
	default: // a rotation is already due: it reads the newest token
	}
}

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
	defer a.work.Close()   // and refuses interactions: a session that outlives Run (a discordgo reconnect racing Close) must not reach closed stores
	a.register(s, readyCh)
	select {
	case <-a.rotated: // a token set before Run: the session already has it
	default:
	}
	if err := a.connect(ctx, s); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		a.ready.Store(false)
		if err := a.session().Close(); err != nil { // the current one (a rotation replaces it)
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
		case <-a.rotated:
			a.reidentify(ctx)
		}
	}
}

// drain stops taking events and waits (bounded) for accepted ones.
func (a *Adapter) drain() error {
	a.work.Close()
	a.events.close()
	done := make(chan struct{})
	go func() { a.events.wait(); a.work.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(a.opt.DrainTimeout):
		return fmt.Errorf("discord: %w: in-flight events did not finish in %s", context.DeadlineExceeded, a.opt.DrainTimeout)
	}
}

func (a *Adapter) newSession() (*discordgo.Session, error) {
	return a.newSessionWith(a.token.Get())
}

// newSessionWith builds a session that identifies with tok (REST calls
// carry the newest token whatever tok is: see transport).
func (a *Adapter) newSessionWith(tok string) (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + tok)
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
// queues its event: messages and thread changes go through a queue ordered
// per conversation (a conversation's messages are handled in the order
// Discord sent them; one slow conversation never holds up another),
// interactions run on their own goroutine, behind no queue (Discord wants
// an answer within 3 s). Every handler and every worker runs under a recover.
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
	s.AddHandler(func(s *discordgo.Session, g *discordgo.GuildCreate) {
		defer a.recoverHandler("guild_create")
		if g.Guild != nil {
			a.catchUpGuild(s, g.Guild) // inline, like READY's: ahead of the guild's later events
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
		a.events.push(m.ChannelID, "message_create", func(ctx context.Context) { a.onMessage(ctx, m.Message) })
	})
	s.AddHandler(func(s *discordgo.Session, t *discordgo.ThreadUpdate) {
		defer a.recoverHandler("thread_update")
		a.events.push(t.Channel.ID, "thread_update", func(ctx context.Context) { a.onThreadState(ctx, t.Channel) })
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageUpdate) {
		defer a.recoverHandler("message_update")
		a.events.push(m.ChannelID, "message_update", func(ctx context.Context) { a.onMessageUpdate(ctx, m.Message) })
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageDelete) {
		defer a.recoverHandler("message_delete")
		a.events.push(m.ChannelID, "message_delete", func(ctx context.Context) {
			a.onMessagesDeleted(ctx, m.GuildID, m.ChannelID, []string{m.ID})
		})
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageDeleteBulk) {
		defer a.recoverHandler("message_delete_bulk")
		a.events.push(m.ChannelID, "message_delete_bulk", func(ctx context.Context) {
			a.onMessagesDeleted(ctx, m.GuildID, m.ChannelID, m.Messages)
		})
	})
	s.AddHandler(func(s *discordgo.Session, t *discordgo.ThreadDelete) {
		defer a.recoverHandler("thread_delete")
		a.events.push(t.Channel.ID, "thread_delete", func(ctx context.Context) {
			a.onConversationDeleted(ctx, t.Channel.ID, t.Channel.ParentID)
			a.onGone(ctx, t.Channel.ID)
		})
	})
	s.AddHandler(func(s *discordgo.Session, c *discordgo.ChannelDelete) {
		defer a.recoverHandler("channel_delete")
		a.events.push(c.Channel.ID, "channel_delete", func(ctx context.Context) {
			a.onConversationDeleted(ctx, c.Channel.ID, "")
			a.onGone(ctx, c.Channel.ID)
		})
	})
	s.AddHandler(func(s *discordgo.Session, _ *discordgo.RateLimit) {
		// discordgo waits out 429s itself and returns no error; count them here.
		defer a.recoverHandler("rate_limit")
		a.d.Metrics.RESTError(0, http.StatusTooManyRequests)
	})
	s.AddHandler(func(s *discordgo.Session, i *discordgo.InteractionCreate) {
		defer a.recoverHandler("interaction_create")
		if !a.goTracked("interaction_create", func(ctx context.Context) { a.onInteraction(ctx, i.Interaction) }) {
			a.refuseStopping(i.Interaction)
		}
	})
}

// workCtx is the context of event work: it outlives Run's context, so work
// already accepted finishes during a graceful stop (bounded by Run).
func (a *Adapter) workCtx() context.Context { return context.WithoutCancel(a.runCtx()) }

// goTracked runs f on its own goroutine under a recover; Run waits for it.
// It reports false, running nothing, once the adapter is draining.
func (a *Adapter) goTracked(name string, f func(context.Context)) bool {
	if !a.work.Add() {
		return false
	}
	go func() {
		defer a.work.Done()
		defer a.recoverHandler(name)
		f(a.workCtx())
	}()
	return true
}

// interactionWindow is how long Discord waits for an interaction's first
// response (then it fails with 10062 and shows "did not respond").
const interactionWindow = 3 * time.Second

// restartingText answers a command that arrives while the bot stops.
const restartingText = "⏳ The bot is restarting; try again in a moment."

// refuseStopping answers an interaction that arrived while the adapter
// drains: an ephemeral "restarting" line if its 3 s window still allows,
// else nothing (Discord then shows its own failure). It runs inline on the
// gateway goroutine, bounded by that window; the bot is stopping anyway.
func (a *Adapter) refuseStopping(in *discordgo.Interaction) {
	s := a.session()
	if s == nil || in == nil || in.Type != discordgo.InteractionApplicationCommand {
		return
	}
	created, err := discordgo.SnowflakeTimestamp(in.ID)
	if err != nil {
		return
	}
	deadline := created.Add(interactionWindow)
	if !a.d.Clock.Now().Before(deadline) {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err = s.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: restartingText, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}}, discordgo.WithContext(ctx))
	if err != nil {
		a.countError(err)
		a.log.Warn().Err(err).Msg("discord: refusing an interaction while stopping failed")
	}
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
