package bot

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

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
	started     time.Time // when Run opened the store

	opts Options // what New was given; Run builds from them
	deps Deps
	// up is closed once Run opened the store and built every component:
	// from then on the components are set and never replaced.
	up chan struct{}
	// connected is closed once the Discord gateway's session is up (at
	// once, after up, on a bot without Discord).
	connected chan struct{}
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
	// wired, if set, sees the built app before its components run (this
	// package's tests replace a component with a faulty one).
	wired func(*App)
}

// New checks what can be checked without I/O and returns the App unbuilt:
// it opens nothing and connects to nothing. Run opens the store (and, on
// PostgreSQL, the cluster's connections) and builds every component over
// it before running them; Started says when that is done.
func New(o Options, d Deps) (*App, error) {
	cfg := o.Config
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
	return &App{opts: o, deps: d, cfg: cfg, log: d.Log, clock: d.Clock, httpAddr: make(chan string, 1),
		up: make(chan struct{}), connected: make(chan struct{}), recovered: make(chan struct{}), resumed: make(chan struct{})}, nil
}

// open is the start step Run performs first: it opens the store and the
// cluster's connections and builds every component over them. On an error
// it closes what it opened.
func (a *App) open(ctx context.Context) error {
	o, d, cfg, log := a.opts, a.deps, a.cfg, a.log
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := OpenStore(octx, cfg.Store, time.Second)
	if err != nil {
		return err
	}
	a.store, a.reg, a.started = st, prometheus.NewRegistry(), d.Clock.Now()
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	a.observeEnded = d.BindingEnded
	// With thread bindings off, stored bindings stop routing and are kept (invariant 8).
	a.bindings = binding.New(binding.Options{SweepInterval: bindingTick(st), Disabled: !cfg.Discord.ThreadBindings.Enabled},
		binding.Deps{Store: st, Clock: d.Clock, Log: log.With().Str("component", "bindings").Logger(), OnEnded: a.bindingEnded})
	if a.cluster, err = newCluster(octx, st, a.bindings, log.With().Str("component", "cluster").Logger()); err != nil {
		st.Close()
		return err
	}
	a.metrics = metrics.New(a.reg, func() float64 { return float64(len(a.bindings.Active())) })
	a.reg.MustRegister(leaderGauge(a))
	a.transcripts = transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: d.Clock, Erasers: []transcript.Eraser{transcript.EraserFunc(a.eraseCopies), transcript.EraserFunc(a.eraseNotes)}})
	a.router = delivery.NewRouter(delivery.RouterOptions{}, delivery.RouterDeps{Bindings: a.bindings})

	if err := a.wire(o, d); err != nil {
		a.release()
		return err
	}
	if d.wired != nil {
		d.wired(a)
	}
	return nil
}

// wire builds every component over the opened store, each once, in one
// direction: the platforms' clients, the send owner, the scheduler, the
// sessions, the commands, the platforms' inbound sides. Where two need
// each other (the scheduler runs jobs as turns, the sessions offer job
// tools; the transcripts erase copies in the outbox built over them), the
// earlier one is given a function reaching the later one through a, called
// only once every component is built.
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
	if a.routes, err = agentRoutes(cfg, a.platforms); err != nil {
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
			Commands: discord.CommandPlatform(cfg.Discord.ThreadBindings.Enabled), Locator: a.discord})
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

// SetToken applies a rotated bot token: every later REST call uses it, and
// the gateway re-identifies with it.
func (a *App) SetToken(token string) {
	if a.discord != nil {
		a.discord.SetToken(token)
	}
}

// Connected is closed once the Discord gateway's session is up; on a bot
// without Discord, as soon as Run started.
func (a *App) Connected() <-chan struct{} { return a.connected }

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
