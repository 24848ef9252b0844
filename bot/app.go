package bot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/adapter/discord"
	"github.com/agentbot/agentbot/adapter/matrix"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/console"
	"github.com/agentbot/agentbot/core/agentroute"
	"github.com/agentbot/agentbot/core/audit"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/platform"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	modelusage "github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/internal/procs"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/metrics"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/fallback"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/bolt"
	"github.com/agentbot/agentbot/tools/mcp"
)

// App is the whole bot, wired explicitly: store, core services, sessions,
// the Discord adapter, the scheduler and the HTTP endpoints.
type App struct {
	procs *procs.Registry
	cfg   *config.Config
	log   zerolog.Logger
	clock clock.Clock
	store Store
	reg   *prometheus.Registry

	bindings    *binding.Service
	transcripts *transcript.Service
	outbound    *delivery.Outbound
	routes      *agentroute.Table // agents[].channels
	router      *delivery.Router
	sessions    *session.Manager
	discord     *discord.Client
	matrix      *matrixSide     // nil: not on Matrix
	platforms   *platform.Table // each platform's sender, directory, threads, typist and wording
	auth        *authz.Authority
	gateway     *discord.Gateway
	sched       *schedulerBridge
	models      *fallback.Set
	usage       *modelusage.Meter
	cluster     *cluster     // several processes on PostgreSQL; nil on bbolt
	acp         *acp.Manager // external coding agents; nil when acp.agents is empty
	metrics     *metrics.Metrics
	tools       *mcp.Hub // MCP servers; nil when none is configured
	auditor     *audit.Auditor
	recall      *recallSide
	notes       *notesSide
	started     time.Time
	// recovered is closed once the outbox left by the previous run is
	// finished (Discord connected, Outbound.Recover done).
	recovered chan struct{}
	// resumed is closed once the previous run's turns were resumed (after
	// recovered): the Matrix /sync loop starts then.
	resumed  chan struct{}
	httpAddr chan string // receives the bound HTTP address (tests)

	observeEnded func(binding.Record) // Deps.BindingEnded
	closeOnce    sync.Once
	closeErr     error
}

// Options are what the application is asked to be: its config and the
// pacing that differs between `bot run`, `bot demo` and tests.
type Options struct {
	Config        *config.Config
	RetryBackoff  time.Duration
	SweepInterval time.Duration
	// MCPBackoff is the first MCP server restart delay (0: the hub's default).
	MCPBackoff time.Duration
}

// Deps are what the application is given.
type Deps struct {
	Log           zerolog.Logger
	Clock         clock.Clock       // nil: the real clock
	BaseTransport http.RoundTripper // under the adapter's rewriting transport
	HTTPClient    *http.Client      // for model providers
	// Provider, if set, replaces every agent's model provider (tests:
	// a provider that blocks until released).
	Provider model.Provider
	// TypingAfter, if set, paces the typing indicator (tests fire it by hand).
	TypingAfter session.After
	// LiveAfter, if set, paces streamed replies' edits (tests).
	LiveAfter func(time.Duration) <-chan time.Time
	// Redactor is the log's redactor (its secrets grow on SIGHUP): every
	// text sent to a chat passes it too (invariant 14). nil: one made
	// from the config's secrets.
	Redactor *redact.Redactor
	// BindingEnded, if set, sees every binding that ends, after the
	// sessions and ACP agents did (tests).
	BindingEnded func(binding.Record)
	// NoUsage switches usage accounting off for model calls (the load
	// harness measures its cost against a run with it; no config key).
	NoUsage bool
	// IndexLag, if set, sees each transcript change the recall indexer
	// applies: how long after its entry was written (the load harness).
	IndexLag func(time.Duration)
}

// New opens the store and builds every component. It connects to
// nothing: Run does.
func New(o Options, d Deps) (*App, error) {
	cfg, log := o.Config, d.Log
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Redactor == nil {
		d.Redactor = redact.New(cfg.Secrets()...)
	}
	if cfg.HTTP.Enabled() {
		// The console refuses a non-loopback listener without a token (exit 2).
		if err := console.CheckAccess(cfg.HTTP.Listen, cfg.HTTP.Token); err != nil {
			return nil, fmt.Errorf("%w (%w)", err, config.ErrInvalid)
		}
	}
	octx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st, err := OpenStore(octx, cfg.Store, time.Second)
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log, clock: d.Clock, store: st, reg: prometheus.NewRegistry(), started: d.Clock.Now(), httpAddr: make(chan string, 1),
		recovered: make(chan struct{}), resumed: make(chan struct{})}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	a.observeEnded = d.BindingEnded
	// With thread bindings off, stored bindings stop routing and are kept (invariant 8).
	a.bindings = binding.New(binding.Options{SweepInterval: bindingTick(st), Disabled: !cfg.Discord.ThreadBindings.Enabled},
		binding.Deps{Store: st, Clock: d.Clock, Log: log.With().Str("component", "bindings").Logger(), OnEnded: a.bindingEnded})
	if a.cluster, err = newCluster(octx, st, a.bindings, log.With().Str("component", "cluster").Logger()); err != nil {
		st.Close()
		return nil, err
	}
	a.metrics = metrics.New(a.reg, func() float64 { return float64(len(a.bindings.Active())) })
	a.reg.MustRegister(leaderGauge(a))
	a.transcripts = transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: d.Clock, Erasers: []transcript.Eraser{transcript.EraserFunc(a.eraseCopies), transcript.EraserFunc(a.eraseNotes)}})
	a.router = delivery.NewRouter(delivery.RouterOptions{}, delivery.RouterDeps{Bindings: a.bindings})

	if err := a.wire(o, d); err != nil {
		if a.recall != nil {
			_ = a.recall.close()
		}
		a.cluster.close()
		st.Close()
		return nil, err
	}
	return a, nil
}

// wire builds every component over the opened store, each once, in one
// direction: the platforms' clients, the send owner, the scheduler, the
// sessions, the commands, the platforms' inbound sides. Where two need
// each other (the scheduler runs jobs as turns, the sessions offer job
// tools; the transcripts erase copies in the outbox built over them), the
// earlier one is given a function reaching the later one through a, called
// only once New has returned.
func (a *App) wire(o Options, d Deps) error {
	cfg, log, st := a.cfg, a.log, a.store
	models, err := buildModels(cfg, d.HTTPClient, d.Clock, a.metrics, log.With().Str("component", "models").Logger())
	if err != nil {
		return err
	}
	a.models = models
	agents := buildAgents(cfg, models)
	if d.Provider != nil {
		for i := range agents {
			agents[i].Provider = d.Provider
		}
	}
	if err := a.newPlatforms(o, d); err != nil {
		return err
	}
	// Who may do what is asked of each conversation's own platform
	// (invariant 13); operators come from discord.operators and
	// matrix.operators (user ids of either platform).
	a.auth = authz.New(authz.Config{OperatorUsers: slices.Concat(cfg.Discord.Operators.Users, cfg.Matrix.Operators), OperatorRoles: cfg.Discord.Operators.Roles},
		a.platforms)
	locators := map[string]agentroute.Locator{}
	if a.discord != nil {
		locators["discord"] = a.discord
	}
	if a.routes, err = agentRoutes(cfg, locators); err != nil {
		return err
	}
	a.outbound = delivery.NewOutbound(delivery.OutboundOptions{
		DefaultAgent: agents[0].ID, Owner: a.cluster.ownerID(), Lease: clusterClaimLease,
	}, delivery.OutboundDeps{
		Sender: a.platforms, Outbox: st, Transcripts: a.transcripts, Bindings: a.bindings, Agents: a.routes,
		Clock: d.Clock, Log: log.With().Str("component", "outbound").Logger(),
		Observe:  func(r delivery.Record) { a.metrics.Delivery(string(r.State), string(r.Delivery.Producer.Source)) },
		Diagnose: func(d delivery.Diagnostic) { a.metrics.Rule1Exception(d.Reason) },
		Claimer:  a.cluster.claimer(),
		Redact:   d.Redactor,
		// A recovered completion goes through its live path (router, fail-closed).
		Recover: map[transcript.Source]delivery.RecoverFunc{transcript.SourceAnnounce: func(ctx context.Context, r delivery.Record) (bool, error) {
			return a.sessions.RecoverCompletion(ctx, r)
		}},
	})
	// Child process groups (MCP servers, ACP agents) are recorded, and
	// those a killed bot left are killed at the next start (invariant 21).
	a.procs = procs.New(procs.Options{}, procs.Deps{Store: st, Log: log.With().Str("component", "procs").Logger()})
	// MCP servers: started eagerly by Run, their tools offered per agent
	// and user (docs/DECISIONS.md).
	a.tools = newToolHub(cfg, a.auth, a.metrics, log, o.MCPBackoff, a.procs)
	if cfg.Scheduler.Enabled {
		a.sched = newSchedulerBridge(a)
	}
	if a.recall, err = newRecallSide(cfg, st, a.auth, d, log.With().Str("component", "memory").Logger()); err != nil {
		return err
	}
	a.notes = newNotesSide(a)
	if a.acp, err = newACP(a); err != nil {
		return err
	}
	gate := a.newSessions(agents, d)
	if err := a.newAuditor(d); err != nil {
		return err
	}
	return a.inbound(o, gate)
}

// newPlatforms builds the platforms' REST clients and fills the platform
// table with them, once (no I/O but the recent deliveries the Discord
// client must not take for another's).
func (a *App) newPlatforms(o Options, d Deps) error {
	cfg, log := a.cfg, a.log
	var ps []platform.Platform
	if cfg.DiscordOn() {
		var err error
		a.discord, err = discord.NewClient(discord.ClientOptions{
			Token: cfg.Discord.Token, APIURL: cfg.Discord.APIURL, Guilds: cfg.Discord.Guilds,
			BaseTransport: d.BaseTransport, RetryBackoff: o.RetryBackoff, Confirmed: a.recentlyConfirmed(),
		}, discord.ClientDeps{Webhooks: a.store, Metrics: a.metrics, Clock: d.Clock, Log: log.With().Str("component", "discord").Logger()})
		if err != nil {
			return err
		}
		ps = append(ps, platform.Platform{Name: "discord", Sender: a.discord, Directory: a.discord, Threads: a.discord, Typist: a.discord, Deleter: a.discord,
			Commands: discord.CommandPlatform(cfg.Discord.ThreadBindings.Enabled)})
	}
	var err error
	if a.matrix, err = newMatrixClient(cfg.Matrix, log); err != nil {
		return err
	}
	if a.matrix != nil {
		// Its threads post their roots through the Outbound, which posts
		// through this table: they reach it once built.
		if err := a.matrix.newThreads(outboundOf{a}); err != nil {
			return err
		}
		ps = append(ps, platform.Platform{Name: "matrix", Sender: matrix.DeliverySender{Client: a.matrix.client}, Deleter: matrix.DeliverySender{Client: a.matrix.client},
			Directory: matrix.NewDirectory(a.matrix.client), Threads: a.matrix.threads, Typist: matrix.NewTypist(a.matrix.client),
			Commands: matrix.CommandPlatform(cfg.Discord.ThreadBindings.Enabled)})
	}
	a.platforms = platform.New(ps...)
	return nil
}

// recentlyConfirmed are the message ids of the recent deliveries (the
// previous process's too): a message confirmed for one delivery is never
// taken for another's when an ambiguous send is reconciled.
func (a *App) recentlyConfirmed() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := a.store.Deliveries(ctx, "", confirmedSeed)
	if err != nil {
		a.log.Warn().Err(err).Msg("load recent deliveries")
		return nil
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.MessageIDs...)
	}
	return ids
}

// newSessions builds the session manager and returns the access gate it
// shares with the platforms' inbound sides.
func (a *App) newSessions(agents []session.Agent, d Deps) *authz.Gate {
	cfg, tb := a.cfg, a.cfg.Discord.ThreadBindings
	// The model sees the bot's Discord mention as its name, and user
	// attachments are fetched from Discord's CDN.
	var modelText func(string) string
	var fetcher session.Fetcher
	if a.discord != nil {
		modelText, fetcher = a.discord.ModelText, a.discord
	}
	var toolbox session.Toolbox
	if a.tools != nil {
		toolbox = a.tools
	}
	toolbox = a.notes.toolbox(a.recall.toolbox(toolbox))
	var jobs session.Jobs
	if a.sched != nil {
		jobs = a.sched
	}
	// One access gate (config access, alias discord.access) for every
	// platform: the same policy and one turn budget per user and place.
	// Admission takes a turn per message, the session manager one per
	// re-run after an edit and per subagent spawned (invariant 20).
	access := cfg.EffectiveAccess()
	gate := authz.NewGate(accessPolicy(access), accessLimits(access.RateLimit), d.Clock)
	a.usage = newMeter(a.cfg, a.store, d.Clock, a.metrics, a.log.With().Str("component", "usage").Logger())
	a.sessions = session.New(session.Options{
		Channel: "discord", AccountID: "default", Agents: agents,
		ThreadBindings: tb.Enabled, SpawnSubagentSessions: tb.SpawnSubagentSessions,
		IdleTimeout: tb.IdleTimeout(), MaxAge: tb.MaxAge(),
		MaxConcurrentSubagents: cfg.Subagents.MaxConcurrent, SubagentTimeout: cfg.Subagents.RunTimeout,
		ModelText: modelText,
		OnTurn:    func(d time.Duration) { a.metrics.Turn(d.Seconds()) },
		LiveAfter: d.LiveAfter,
	}, session.Deps{
		Outbound: a.outbound, Router: observedRouter{a.router, a.metrics}, Bindings: a.bindings, Transcripts: a.transcripts,
		Store: a.store, Threads: a.platforms, Typist: a.platforms, Fetcher: fetcher, After: d.TypingAfter, Turns: a.cluster.turnLocker(), Clock: d.Clock,
		Log: a.log.With().Str("component", "sessions").Logger(), Authority: a.auth, Toolbox: toolbox, Budget: gate, Jobs: jobs, Usage: sessionMeter(a.usage, d.NoUsage), Places: a.places(),
		External: acpExternal(a.acp), Notes: a.notes.svc,
	})
	return gate
}

// inbound builds the commands and the platforms' inbound sides, which
// hand each conversation's messages to the sessions (whose one dispatch
// step hands those of a thread bound to an ACP agent on to it).
func (a *App) inbound(o Options, gate *authz.Gate) error {
	cfg, tb := a.cfg, a.cfg.Discord.ThreadBindings
	var jobs command.Jobs
	if a.sched != nil {
		jobs = a.sched
	}
	sessions := a.sessions
	var acpDep discord.ACP
	var acpCmds command.ACP
	if a.acp != nil {
		acpDep, acpCmds = a.acp, acpCommands{a.acp}
	}
	// The commands' logic is the core's; each platform's adapter parses
	// and answers them.
	agentChoices := make([]command.AgentChoice, 0, len(cfg.Agents))
	for _, ag := range cfg.Agents {
		agentChoices = append(agentChoices, command.AgentChoice{ID: ag.ID, Name: ag.Name})
	}
	commands := command.New(command.Options{Agents: agentChoices}, command.Deps{
		Sessions: a.sessions, Bindings: a.bindings, Outbound: a.outbound, Threads: a.platforms, Authority: a.auth, Jobs: jobs, ACP: acpCmds, Agents: a.routes,
		Once: commandOnce{st: a.store, clock: a.clock}, Usage: a.usage, Places: a.places(), Clock: a.clock, Memory: a.recall.commands(),
		Notes: a.notes.commands(),
	})
	if a.discord != nil {
		a.gateway = discord.NewGateway(discord.GatewayOptions{
			Gate:           gate,
			ThreadBindings: tb.Enabled, Reconnect: true, SweepInterval: o.SweepInterval, Shard: shardOf(cfg.Discord.Shard),
			ReprocessEdits: cfg.Discord.Edits == config.EditsReprocess,
		}, discord.GatewayDeps{
			Client: a.discord, Authority: a.auth, Sessions: sessions, Bindings: a.bindings, Outbound: a.outbound, Commands: commands, ACP: acpDep,
			Changes: a.transcripts,
			Metrics: a.metrics, Clock: a.clock, Log: a.log.With().Str("component", "discord").Logger(),
		})
	}
	if a.matrix == nil {
		return nil
	}
	return a.matrix.finish(matrixCore{outbound: a.outbound, sessions: sessions, bindings: a.bindings, changes: a.transcripts,
		commands: commands, threadBindings: tb.Enabled, syncTokenFile: cfg.Matrix.SyncTokenFile,
		gate: gate, operator: a.auth.Operator, clock: a.clock})
}

// bindingEnded tells the ACP agents, then the sessions (then the test's
// observer) of an ended binding. An ACP binding's end first finishes its
// cancelled turn, then the farewell is posted: in that order in the thread
// and its transcript.
func (a *App) bindingEnded(r binding.Record) {
	if a.acp != nil {
		a.acp.OnBindingEnded(r)
	}
	a.sessions.OnBindingEnded(r)
	if a.observeEnded != nil {
		a.observeEnded(r)
	}
}

// eraseCopies erases a deleted message's text from the outbox and the
// seeds of `target: current` jobs (invariant 17), after the transcript's.
func (a *App) eraseCopies(ctx context.Context, e transcript.Entry) error {
	if err := a.outbound.EraseEntry(ctx, e); err != nil {
		return err
	}
	if a.sched != nil {
		return a.sched.Scheduler.EraseEntry(ctx, e)
	}
	return nil
}

// accessPolicy maps config access onto the gate's policy.
func accessPolicy(c config.AccessConfig) authz.Policy {
	return authz.Policy{DM: c.DM,
		Allow: authz.Lists{Users: c.Allow.Users, Roles: c.Allow.Roles, Channels: c.Allow.Channels},
		Deny:  authz.Lists{Users: c.Deny.Users, Roles: c.Deny.Roles, Channels: c.Deny.Channels}}
}

// accessLimits maps config access.rateLimit onto the gate's limits.
func accessLimits(c config.RateLimitConfig) authz.Limits {
	return authz.Limits{Turns: c.Turns, GuildTurns: c.GuildTurns, Per: c.Per}
}

// confirmedSeed is how many recent deliveries' message ids the adapter
// learns at start.
const confirmedSeed = 4000

// shardOf maps discord.shard onto the adapter's shard.
func shardOf(c config.ShardConfig) discord.Shard {
	n, auto := c.Total()
	return discord.Shard{ID: c.ID, Count: n, Auto: auto}
}

// observedRouter counts router decisions.
type observedRouter struct {
	r *delivery.Router
	m *metrics.Metrics
}

func (o observedRouter) ResolveDestination(req delivery.RouteRequest) delivery.Decision {
	d := o.r.ResolveDestination(req)
	o.m.Route(string(d.Mode), d.Reason)
	return d
}

// buildAgents maps configured agents onto sessions' agents with their
// models' fallback chains.
func buildAgents(cfg *config.Config, models *fallback.Set) []session.Agent {
	out := make([]session.Agent, 0, len(cfg.Agents))
	for _, ac := range cfg.Agents {
		mc := cfg.Models[ac.Model]
		p, _ := models.Provider(ac.Model) // validated: every agent's model is defined
		out = append(out, session.Agent{ID: ac.ID, Name: ac.Name, AvatarURL: ac.AvatarURL, SystemPrompt: ac.SystemPrompt,
			Provider: p, MaxHistory: mc.MaxHistory, MaxToolSteps: mc.MaxToolSteps, Vision: mc.Vision, Stream: mc.Stream,
			Model: ac.Model, Footer: mc.Footer})
	}
	return out
}

// Run loads state, recovers unfinished deliveries, and runs every
// component under one errgroup until ctx ends; then everything stops
// within bounded time and the store is closed.
func (a *App) Run(ctx context.Context) error {
	defer a.Close()
	if err := a.bindings.Load(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: a clean stop
		}
		return err
	}
	if err := a.sessions.Load(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if n, err := a.procs.Reap(ctx); err != nil {
		a.log.Error().Err(err).Msg("child processes a previous run left could not be checked")
	} else if n > 0 {
		a.log.Warn().Int("groups", n).Msg("killed child process groups a previous run left running")
	}
	g, gctx := errgroup.WithContext(ctx)
	// Shutdown order: the adapter and the scheduler stop taking work and
	// finish what they accepted; then sessions drain their queues; then
	// bindings flush their last activity; the store closes last (deferred).
	sessCtx, stopSessions := context.WithCancel(context.WithoutCancel(ctx))
	bindCtx, stopBindings := context.WithCancel(context.WithoutCancel(ctx))
	var producers sync.WaitGroup
	producers.Add(1) // the recovery and the scheduler, below
	if a.matrix != nil {
		producers.Add(1)
		g.Go(func() error {
			defer producers.Done()
			// The /sync loop starts once the previous run's deliveries were
			// recovered and its turns resumed: an event handed again (its
			// token was not saved) then finds its command's reply sent and
			// its turn known, never a half-finished state.
			select {
			case <-gctx.Done():
				return nil
			case <-a.resumed:
			}
			return a.matrix.Run(gctx)
		})
	}
	go func() { producers.Wait(); stopSessions() }()
	// MCP servers stop after the sessions drained (a draining turn may call a tool).
	toolsCtx, stopTools := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error { defer stopBindings(); defer stopTools(); return a.sessions.Run(sessCtx) })
	if a.tools != nil {
		g.Go(func() error { return a.tools.Run(toolsCtx) })
	}
	if a.acp != nil {
		g.Go(func() error { return a.acp.Run(sessCtx) })
	}
	g.Go(func() error { return a.bindings.Run(bindCtx) })
	if a.cluster != nil {
		// Other processes' binding changes, within a second.
		g.Go(func() error { return a.cluster.listener.Run(gctx) })
	}
	now := make(chan struct{})
	close(now)
	var connected <-chan struct{} = now // Matrix's REST needs no connection first
	if a.gateway != nil {
		producers.Add(1)
		g.Go(func() error { defer producers.Done(); return a.gateway.Run(gctx) })
		connected = a.gateway.Connected()
	}
	g.Go(func() error {
		defer producers.Done()
		// Finish deliveries a previous process left pending, once connected.
		select {
		case <-gctx.Done():
			return nil
		case <-connected:
		}
		n, err := a.outbound.Recover(context.WithoutCancel(gctx), a.started)
		close(a.recovered)
		if err != nil {
			a.log.Error().Err(err).Msg("recover deliveries")
		} else if n > 0 {
			a.log.Info().Int("deliveries", n).Msg("finished deliveries left by the previous run")
		}
		if turns, runs := a.sessions.Resume(context.WithoutCancel(gctx)); turns+runs > 0 {
			a.log.Info().Int("turns", turns).Int("subagentRuns", runs).Msg("resumed work left by the previous run")
		}
		close(a.resumed)
		return a.runLed(gctx) // the scheduler; with several processes, in the leader only
	})
	if a.cfg.HTTP.Enabled() {
		g.Go(func() error { return a.serveHTTP(gctx) })
	}
	if p, ok := a.store.(deliveryPruner); ok && a.cfg.Store.DeliveryRetention() > 0 {
		g.Go(func() error { a.pruneDeliveries(gctx, p, time.NewTicker(time.Hour).C); return nil })
	}
	if a.cfg.Store.DeliveryRetention() > 0 {
		g.Go(func() error { a.pruneUsage(gctx, time.NewTicker(time.Hour).C); return nil })
	}
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// Close releases what New opened: the cluster's connections, then the
// store. Run closes them when it returns; Close is for an App that is
// never run, and a second call does nothing.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		if a.recall != nil {
			_ = a.recall.close() // before the store
		}
		a.cluster.close()
		a.closeErr = a.store.Close()
	})
	return a.closeErr
}

// SetToken applies a rotated bot token: every later REST call uses it, and
// the gateway re-identifies with it.
func (a *App) SetToken(token string) {
	if a.discord != nil {
		a.discord.SetToken(token)
	}
}

// Connected is closed once the Discord gateway's session is up; at once
// on a bot without Discord.
func (a *App) Connected() <-chan struct{} {
	if a.gateway == nil {
		now := make(chan struct{})
		close(now)
		return now
	}
	return a.gateway.Connected()
}

// Scheduler is the job scheduler (nil with scheduler.enabled off); tools
// read its jobs.
func (a *App) Scheduler() *scheduler.Scheduler {
	if a.sched == nil {
		return nil
	}
	return a.sched.Scheduler
}

// HTTPAddr receives the HTTP server's bound address once it listens
// (http.listen may name port 0).
func (a *App) HTTPAddr() <-chan string { return a.httpAddr }

// ready: the Discord gateway's session is ready (a Matrix-only process has
// no connection to wait for: its /sync loop retries on its own).
func (a *App) ready() bool { return a.gateway == nil || a.gateway.Ready() }

func (a *App) serveHTTP(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.ready() {
			http.Error(w, "gateway not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
		// Degraded, not unready: their fallbacks answer, or a notice says why.
		for _, d := range a.models.Degraded() {
			_, _ = w.Write([]byte("model " + d + "\n"))
		}
		if a.tools != nil {
			// Degraded, not unready: the bot still answers without them.
			for _, f := range a.tools.Failing() {
				_, _ = w.Write([]byte("mcp " + redact.String(f) + "\n"))
			}
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /inspect/{what}", inspectHandler(inspector{a.store, redact.New(a.cfg.Secrets()...)}))
	mux.Handle("GET /backup", backupHandler(a.store, a.cfg.HTTP.Token))
	console.New(console.Options{Store: a.store, Audit: a.auditor.Conversation, Location: a.cfg.HTTP.Location(), Token: a.cfg.HTTP.Token,
		Status: func() console.State { return console.State{Ready: a.ready(), Started: a.started} },
		Log:    a.log.With().Str("component", "console").Logger(), Memory: a.recall.console(), Notes: a.notes}).Mount(mux) // read-only pages at /
	ln, err := net.Listen("tcp", a.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http.listen %s: %w", a.cfg.HTTP.Listen, err)
	}
	a.httpAddr <- ln.Addr().String()
	// Every path, probes included, passes the Host check; everything but
	// the probes needs the token when one is set (/metrics included).
	guarded := console.Guard(console.GuardOptions{Listen: a.cfg.HTTP.Listen, Token: a.cfg.HTTP.Token,
		Open: []string{"/healthz", "/readyz"}}, mux)
	srv := &http.Server{Handler: guarded, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	a.log.Info().Str("addr", ln.Addr().String()).Msg("serving /healthz /readyz /metrics and the console at /")
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// deliveryPruner is a store that deletes old finished outbox records
// (bbolt; PostgreSQL does not yet).
type deliveryPruner interface {
	PruneDeliveries(ctx context.Context, before time.Time, dry bool) (bolt.DeliveryPrune, error)
}

// pruneDeliveries applies store.deliveryRetentionDays at start and on
// every tick until ctx ends.
func (a *App) pruneDeliveries(ctx context.Context, p deliveryPruner, tick <-chan time.Time) {
	for {
		before := a.clock.Now().Add(-a.cfg.Store.DeliveryRetention())
		n, err := p.PruneDeliveries(ctx, before, false)
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Error().Err(err).Msg("delivery retention")
		case n.Rows > 0:
			a.log.Info().Int("deliveries", n.Rows).Int64("bytes", n.Bytes).Int("retentionDays", a.cfg.Store.DeliveryRetentionDays).
				Msg("deleted finished deliveries past retention")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}
