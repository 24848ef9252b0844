package discord

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/internal/work"
	"github.com/agentbot/agentbot/metrics"
)

// GatewayOptions configure the Gateway.
type GatewayOptions struct {
	// Gate is the access gate shared by every platform (config access): policy and turn budget. nil: one is
	// built from Access and Limits (tests, a Discord-only wiring of its own).
	Gate *authz.Gate
	// Access is the access policy (who may start turns); Limits its rateLimit. Used only without a Gate.
	Access         authz.Policy
	Limits         authz.Limits
	ThreadBindings bool
	SweepInterval  time.Duration
	// Reconnect lets discordgo reconnect after gateway errors (true in production).
	Reconnect bool
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

// Sessions is what the Gateway needs of core/session.Manager.
type Sessions interface {
	HandleMessage(ctx context.Context, msg session.Message) error
	// OwnSessions are a conversation's own sessions, one per agent (a
	// route change leaves its earlier messages in another agent's).
	OwnSessions(conv binding.ConversationRef) []string
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

// Bindings is what the Gateway needs of core/binding.Service.
type Bindings interface {
	ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool)
	Unbind(ctx context.Context, in binding.UnbindInput) ([]binding.Record, error)
	Active() []binding.Record
	// All is every binding, ended ones included: a deleted thread erases
	// what it displayed for sessions it was bound to before.
	All(ctx context.Context) ([]binding.Record, error)
	Touch(id string, at time.Time)
}

// Commander runs the platform-neutral commands (core/command.Commands).
type Commander interface {
	Run(ctx context.Context, v command.Invocation) (command.Reply, error)
	// Complete suggests values for the option being typed (autocomplete).
	Complete(ctx context.Context, v command.Invocation, option, typed string) []command.Choice
}

// Deliverer is the outbound send owner (core/delivery.Outbound).
type Deliverer interface {
	Deliver(ctx context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error)
	SessionFor(ref binding.ConversationRef) (string, binding.Record, bool)
	// WithConversation runs fn under the conversation's send lock.
	WithConversation(ref binding.ConversationRef, fn func() error) error
}

// GatewayDeps are the Gateway's collaborators. Client and Commands are
// required.
type GatewayDeps struct {
	Client *Client
	// Authority is the one authority rule (invariant 13): slash commands,
	// components and admission ask it, as the model's tools and the
	// scheduler do.
	Authority *authz.Authority
	Sessions  Sessions
	Bindings  Bindings
	Outbound  Deliverer
	// Commands runs the slash commands (core/command.Commands): this
	// adapter parses and answers them.
	Commands Commander
	// Changes records edits and deletions (nil: ignored).
	Changes ChatChanges
	// ACP answers the permission buttons of external coding agents (nil:
	// none configured).
	ACP     ACP
	Metrics *metrics.Metrics
	Clock   clock.Clock
	Log     zerolog.Logger
}

// Gateway is the event side of the adapter: the gateway connection and
// its shard, inbound routing, slash commands and components, thread
// lifecycle and catch-up. It reads and calls Discord through its Client
// (sharing the Client's session, whose state cache the gateway fills);
// the Client knows nothing of it.
type Gateway struct {
	opt GatewayOptions
	d   GatewayDeps
	c   *Client
	log zerolog.Logger

	mu    sync.RWMutex
	ctx   context.Context
	ready atomic.Bool
	// stopped is set when Run returns: no session of this gateway may
	// connect again (see dial).
	stopped atomic.Bool
	gate    *authz.Gate

	shard      Shard        // Count 0 until known (auto); guarded by mu
	identifies atomic.Int64 // connect attempts (see connect)

	events *eventQueue
	// What catchUp found at the last READY, for catchUpGuild; guarded by mu.
	catchUpMarks   map[string]string
	catchUpFloor   string
	guildsCaughtUp map[string]bool
	work           work.Group    // interaction goroutines; closed by drain
	connected      chan struct{} // closed at the first READY
}

// NewGateway returns a gateway over d.Client. It does no I/O; Run connects.
func NewGateway(opt GatewayOptions, d GatewayDeps) *Gateway {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if opt.SweepInterval <= 0 {
		opt.SweepInterval = 2 * time.Minute
	}
	if opt.DrainTimeout <= 0 {
		opt.DrainTimeout = 15 * time.Second
	}
	g := &Gateway{opt: opt, d: d, c: d.Client, log: d.Log, ctx: context.Background(), connected: make(chan struct{})}
	g.gate = opt.Gate
	if g.gate == nil {
		g.gate = authz.NewGate(opt.Access, opt.Limits, d.Clock)
	}
	g.shard = Shard{ID: opt.Shard.ID}
	if !opt.Shard.Auto {
		g.shard.Count = max(opt.Shard.Count, 1)
	}
	return g
}

// Connected is closed once the first gateway session is ready.
func (g *Gateway) Connected() <-chan struct{} { return g.connected }

// Ready reports whether the gateway session is ready.
func (g *Gateway) Ready() bool { return g.ready.Load() }

// Run connects to the gateway, registers slash commands, serves events
// until ctx ends, then closes the session.
func (g *Gateway) Run(ctx context.Context) error {
	s := g.c.session()
	readyCh := make(chan struct{}, 1)
	g.mu.Lock()
	g.ctx = ctx
	g.mu.Unlock()
	g.events = newEventQueue(g)
	defer g.events.close() // every return path ends the worker (drain closes it first)
	defer g.work.Close()   // and refuses interactions: a session that outlives Run (a discordgo reconnect racing Close) must not reach closed stores
	g.register(s, readyCh)
	select {
	case <-g.c.rotated: // a token set before Run: the session already has it
	default:
	}
	if err := g.connect(ctx, s); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		g.ready.Store(false)
		g.stopped.Store(true)
		g.closeForGood(g.c.session()) // the current one (a rotation replaces it)
	}()
	select {
	case <-readyCh:
		close(g.connected)
	case <-ctx.Done():
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("discord: gateway did not send READY within 30s")
	}
	if err := g.registerCommands(ctx); err != nil {
		if ctx.Err() != nil { // a stop during registration is a stop, not a failure
			return g.drain()
		}
		return err
	}
	t := time.NewTicker(g.opt.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return g.drain()
		case <-t.C:
			g.Sweep(ctx)
		case <-g.c.rotated:
			g.reidentify(ctx)
		}
	}
}

// drain stops taking events and waits (bounded) for accepted ones.
func (g *Gateway) drain() error {
	g.work.Close()
	g.events.close()
	done := make(chan struct{})
	go func() { g.events.wait(); g.work.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(g.opt.DrainTimeout):
		return fmt.Errorf("discord: %w: in-flight events did not finish in %s", context.DeadlineExceeded, g.opt.DrainTimeout)
	}
}

// prepare sets what the gateway connection needs on a session before it
// opens (the Client built it for REST: token, transport, state).
func (g *Gateway) prepare(s *discordgo.Session) {
	s.Identify.Intents = Intents
	s.ShouldReconnectOnError = g.opt.Reconnect
	d := *websocket.DefaultDialer
	d.NetDialContext = g.dial
	s.Dialer = &d
	if id, n := g.ShardInfo(); n > 1 { // auto: set by fixShard before the first Open
		s.ShardID, s.ShardCount = id, n
	}
}

// errGatewayStopped refuses a connection after Run returned.
var errGatewayStopped = errors.New("discord: the gateway has stopped; its sessions do not connect again")

// dial opens the gateway's TCP connections. Once Run has returned it
// refuses: discordgo's reconnect loop, started by a read or heartbeat
// failure that raced the final Close, would otherwise open a session that
// outlives Run, identify as the bot and take events (interactions among
// them) that a stopped gateway can only refuse. Every connect of every
// session (the loop's too) dials here.
func (g *Gateway) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.stopped.Load() {
		return nil, errGatewayStopped
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// register installs every gateway handler in one place. discordgo runs
// them inline (SyncEvents) so they see events in gateway order; each only
// queues its event: messages and thread changes go through a queue ordered
// per conversation (a conversation's messages are handled in the order
// Discord sent them; one slow conversation never holds up another),
// interactions run on their own goroutine, behind no queue (Discord wants
// an answer within 3 s). Every handler and every worker runs under a recover.
func (g *Gateway) register(s *discordgo.Session, readyCh chan struct{}) {
	s.SyncEvents = true
	s.AddHandler(func(s *discordgo.Session, r *discordgo.Ready) {
		defer g.recoverHandler("ready")
		appID := ""
		if r.Application != nil {
			appID = r.Application.ID
		}
		g.c.setIdentity(r.User.ID, r.User.Username, appID)
		// Inline, before any later event: queue what was missed while down.
		g.catchUp(s)
		g.ready.Store(true)
		select {
		case readyCh <- struct{}{}:
		default:
		}
	})
	s.AddHandler(func(s *discordgo.Session, gc *discordgo.GuildCreate) {
		defer g.recoverHandler("guild_create")
		if gc.Guild != nil {
			g.catchUpGuild(s, gc.Guild) // inline, like READY's: ahead of the guild's later events
		}
	})
	s.AddHandler(func(s *discordgo.Session, _ *discordgo.Resumed) {
		defer g.recoverHandler("resumed")
		g.ready.Store(true)
	})
	s.AddHandler(func(s *discordgo.Session, _ *discordgo.Disconnect) {
		defer g.recoverHandler("disconnect")
		g.ready.Store(false)
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageCreate) {
		defer g.recoverHandler("message_create")
		g.events.push(m.ChannelID, "message_create", func(ctx context.Context) { g.onMessage(ctx, m.Message) })
	})
	s.AddHandler(func(s *discordgo.Session, t *discordgo.ThreadUpdate) {
		defer g.recoverHandler("thread_update")
		g.events.push(t.Channel.ID, "thread_update", func(ctx context.Context) { g.onThreadState(ctx, t.Channel) })
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageUpdate) {
		defer g.recoverHandler("message_update")
		g.events.push(m.ChannelID, "message_update", func(ctx context.Context) { g.onMessageUpdate(ctx, m.Message) })
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageDelete) {
		defer g.recoverHandler("message_delete")
		g.events.push(m.ChannelID, "message_delete", func(ctx context.Context) {
			g.onMessagesDeleted(ctx, m.GuildID, m.ChannelID, []string{m.ID})
		})
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageDeleteBulk) {
		defer g.recoverHandler("message_delete_bulk")
		g.events.push(m.ChannelID, "message_delete_bulk", func(ctx context.Context) {
			g.onMessagesDeleted(ctx, m.GuildID, m.ChannelID, m.Messages)
		})
	})
	s.AddHandler(func(s *discordgo.Session, t *discordgo.ThreadDelete) {
		defer g.recoverHandler("thread_delete")
		g.events.push(t.Channel.ID, "thread_delete", func(ctx context.Context) {
			g.onConversationDeleted(ctx, t.Channel.ID, t.Channel.ParentID)
			g.onGone(ctx, t.Channel.ID)
		})
	})
	s.AddHandler(func(s *discordgo.Session, c *discordgo.ChannelDelete) {
		defer g.recoverHandler("channel_delete")
		g.events.push(c.Channel.ID, "channel_delete", func(ctx context.Context) {
			g.onConversationDeleted(ctx, c.Channel.ID, "")
			g.onGone(ctx, c.Channel.ID)
		})
	})
	s.AddHandler(func(s *discordgo.Session, _ *discordgo.RateLimit) {
		// discordgo waits out 429s itself and returns no error; count them here.
		defer g.recoverHandler("rate_limit")
		g.d.Metrics.RESTError(0, http.StatusTooManyRequests)
	})
	s.AddHandler(func(s *discordgo.Session, i *discordgo.InteractionCreate) {
		defer g.recoverHandler("interaction_create")
		if !g.c.served(i.GuildID) {
			// A guild outside discord.guilds does not exist for the bot
			// (a registration left from an earlier run still reaches it):
			// no command, click or autocomplete is answered.
			return
		}
		if !g.goTracked("interaction_create", func(ctx context.Context) { g.onInteraction(ctx, i.Interaction) }) {
			g.refuseStopping(i.Interaction)
		}
	})
}

// workCtx is the context of event work: it outlives Run's context, so work
// already accepted finishes during a graceful stop (bounded by Run).
func (g *Gateway) workCtx() context.Context { return context.WithoutCancel(g.runCtx()) }

// goTracked runs f on its own goroutine under a recover; Run waits for it.
// It reports false, running nothing, once the gateway is draining.
func (g *Gateway) goTracked(name string, f func(context.Context)) bool {
	if !g.work.Add() {
		return false
	}
	go func() {
		defer g.work.Done()
		defer g.recoverHandler(name)
		f(g.workCtx())
	}()
	return true
}

// interactionWindow is how long Discord waits for an interaction's first
// response (then it fails with 10062 and shows "did not respond").
const interactionWindow = 3 * time.Second

// restartingText answers a command that arrives while the bot stops.
const restartingText = "⏳ The bot is restarting; try again in a moment."

// refuseStopping answers an interaction that arrived while the gateway
// drains: an ephemeral "restarting" line if its 3 s window still allows,
// else nothing (Discord then shows its own failure). It runs inline on the
// gateway goroutine, bounded by that window; the bot is stopping anyway.
func (g *Gateway) refuseStopping(in *discordgo.Interaction) {
	s := g.c.session()
	if in == nil || in.Type != discordgo.InteractionApplicationCommand {
		return
	}
	created, err := discordgo.SnowflakeTimestamp(in.ID)
	if err != nil {
		return
	}
	deadline := created.Add(interactionWindow)
	if !g.d.Clock.Now().Before(deadline) {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err = s.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: restartingText, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}}, discordgo.WithContext(ctx))
	if err != nil {
		g.c.countError(err)
		g.log.Warn().Err(err).Msg("discord: refusing an interaction while stopping failed")
	}
}

func (g *Gateway) recoverHandler(name string) {
	if r := recover(); r != nil {
		g.log.Error().Str("handler", name).Interface("panic", r).Msg("discord handler panicked")
	}
}

func (g *Gateway) runCtx() context.Context {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.ctx
}
