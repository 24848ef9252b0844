package bot

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/matrix"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/delivery"
)

// matrixSide is the bot on a Matrix homeserver (the matrix section),
// alone or beside Discord in the same process, over the same core: its sender
// is one of Outbound's, its directory one of the authority's, its threads
// and typing the sessions', its commands the core's.
type matrixSide struct {
	client  *matrix.Client
	threads *matrix.Threads
	gateway *matrix.Gateway
	sync    *matrix.Sync
	log     zerolog.Logger
}

// newMatrixClient builds the client (no I/O) when the matrix section is
// on; nil otherwise. The rest is wired by (*matrixSide).finish once the
// core exists.
func newMatrixClient(cfg config.MatrixConfig, log zerolog.Logger) (*matrixSide, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	opt := matrix.Options{HomeserverURL: cfg.Homeserver, UserID: cfg.UserID, AccessToken: cfg.AccessToken, SyncTimeout: cfg.SyncTimeout}
	if as := cfg.AppService; as.ASToken != "" {
		opt.AppService = &matrix.AppServiceConfig{ASToken: as.ASToken, UserPrefix: as.UserPrefix, ServerName: cfg.ServerName(), SenderLocalpart: as.SenderLocalpart}
	}
	log = log.With().Str("component", "matrix").Logger()
	c, err := matrix.New(opt, matrix.Deps{Log: log})
	if err != nil {
		return nil, fmt.Errorf("matrix: %w", err)
	}
	return &matrixSide{client: c, log: log}, nil
}

// matrixCore is what the Matrix side works with once the core is built.
type matrixCore struct {
	outbound       matrix.Outbound
	sessions       matrix.Sessions
	bindings       matrix.Bindings
	changes        matrix.ChatChanges
	commands       *command.Commands
	threadBindings bool
	syncTokenFile  string
	// gate is the access gate every platform asks; operator exempts operators from it.
	gate     *authz.Gate
	operator func(ctx context.Context, actor authz.Actor, target binding.ConversationRef) bool
	clock    clock.Clock
}

// outboundOf is a.outbound once built, as Matrix's threads take it.
type outboundOf struct{ a *App }

func (o outboundOf) Deliver(ctx context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error) {
	return o.a.outbound.Deliver(ctx, d, commit)
}

func (o outboundOf) Abandon(ctx context.Context, id, reason string) (bool, error) {
	return o.a.outbound.Abandon(ctx, id, reason)
}

// newThreads builds the thread creator (its roots go through Outbound).
func (m *matrixSide) newThreads(out matrix.Deliverer) error {
	t, err := matrix.NewThreads(matrix.ThreadsOptions{}, matrix.ThreadsDeps{Outbound: out})
	if err != nil {
		return fmt.Errorf("matrix threads: %w", err)
	}
	m.threads = t
	return nil
}

// finish wires the inbound side: the Gateway over the core and the /sync
// loop that feeds it.
func (m *matrixSide) finish(core matrixCore) error {
	gw, err := matrix.NewGateway(matrix.GatewayOptions{}, matrix.GatewayDeps{
		Client: m.client, Sessions: core.sessions, Bindings: core.bindings, Outbound: core.outbound, Changes: core.changes,
		Commands: matrixCommands{c: core.commands, platform: matrix.CommandPlatform(core.threadBindings), client: m.client, gate: core.gate, clock: core.clock},
		Gate:     core.gate, Operator: core.operator, Clock: core.clock, Log: m.log,
	})
	if err != nil {
		return fmt.Errorf("matrix gateway: %w", err)
	}
	s, err := matrix.NewSync(matrix.SyncOptions{}, matrix.SyncDeps{Client: m.client, Tokens: matrix.NewFileTokenStore(core.syncTokenFile),
		Handler: gw.Handle, Log: m.log})
	if err != nil {
		return fmt.Errorf("matrix sync: %w", err)
	}
	m.gateway, m.sync = gw, s
	return nil
}

// Run runs the /sync loop until ctx ends.
func (m *matrixSide) Run(ctx context.Context) error { return m.sync.Run(ctx) }

// matrixCommands runs a Matrix text command through the core's commands,
// worded for Matrix.
type matrixCommands struct {
	c        *command.Commands
	platform command.Platform
	client   *matrix.Client
	gate     *authz.Gate
	clock    clock.Clock
}

var _ matrix.Commands = matrixCommands{}

func (mc matrixCommands) Run(ctx context.Context, conv binding.ConversationRef, userID string, cmd matrix.Command) (string, bool, error) {
	v := cmd.Invocation(conv, userID, mc.platform)
	if mc.gate != nil { // a subagent spends the model like a turn: the same gate as a message (core/command asks it)
		v.Admit = func(ctx context.Context) string {
			return matrix.AdmitCommand(ctx, mc.client, mc.gate, conv, userID, mc.clock.Now())
		}
	}
	r, err := mc.c.Run(ctx, v)
	return r.Text, r.Public, err
}

// commandOnce is command.Once over the outbox: a claimed command event is a
// skipped delivery record under its key (never sent, never recovered, pruned
// with the outbox's retention, far longer than a replay after a crash can
// come). Read-then-write: one process hands a platform's events one at a
// time, so no two claims of one key race.
type commandOnce struct {
	st    delivery.Store
	clock clock.Clock
}

func (o commandOnce) Claim(ctx context.Context, key string) (bool, error) {
	_, found, err := o.st.GetDelivery(ctx, key)
	if err != nil {
		return false, fmt.Errorf("read claim %s: %w", key, err)
	}
	if found {
		return false, nil
	}
	now := o.clock.Now()
	rec := delivery.Record{Delivery: delivery.Delivery{ID: key}, State: delivery.StateSkipped, Reason: "command event claimed", CreatedAt: now, UpdatedAt: now}
	if err := o.st.PutDelivery(ctx, rec); err != nil {
		return false, fmt.Errorf("record claim %s: %w", key, err)
	}
	return true, nil
}
