package bot

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/internal/world"
	"github.com/agentbot/agentbot/model"
)

// harness runs the real wiring against the built-in Discord emulator (a
// world.World): the end-to-end tests use it.
type harness struct {
	world   *world.World
	run     *world.Run // nil: not running
	emu     *discordtest.Emulator
	cfg     *config.Config
	app     *App
	log     zerolog.Logger
	clock   clock.Clock
	guild   discordtest.Guild
	general discordtest.Channel
	alice   discordtest.User
	prov    model.Provider
	base    http.RoundTripper

	// refused names user messages a test expects discord.access to refuse
	// (never routed, so in no transcript: finishBot's Rule 1 check skips them).
	refused map[string]bool
	typing  session.After
	live    func(time.Duration) <-chan time.Time
	prepare func(*App)

	endedMu sync.Mutex
	ended   []func(binding.Record) // told of every ended binding (onEnded)
}

// onEnded tells f of every binding that ends from now on.
func (h *harness) onEnded(f func(binding.Record)) {
	h.endedMu.Lock()
	defer h.endedMu.Unlock()
	h.ended = append(h.ended, f)
}

func (h *harness) bindingEnded(r binding.Record) {
	h.endedMu.Lock()
	fs := slices.Clone(h.ended)
	h.endedMu.Unlock()
	for _, f := range fs {
		f(r)
	}
}

// commandsRoute is where the bot registers its slash commands at start.
const commandsRoute = world.CommandsRoute

// harnessOptions adjust the world and the config.
type harnessOptions struct {
	Dir       string // store directory
	Log       zerolog.Logger
	Clock     clock.Clock
	Configure func(*config.Config)
	Emulator  discordtest.Options
	Provider  model.Provider // replaces every agent's provider when set
	// BaseTransport, when set, is the HTTP transport under the bot's
	// Discord REST client (tests inject network failures with it).
	BaseTransport http.RoundTripper
	// Shared, when set, is a started emulator several harnesses use (one
	// per shard process); it is not seeded and close leaves it running.
	Shared *discordtest.Emulator
	// TypingAfter paces the typing indicator (nil: real time).
	TypingAfter session.After
	// LiveAfter paces streamed replies' edits (nil: real time).
	LiveAfter func(time.Duration) <-chan time.Time
	// Prepare, if set, sees the wired app before its components run
	// (tests replace a component with a faulty one).
	Prepare func(*App)
}

// newHarness starts the emulator and seeds a guild with #general and alice.
func newHarness(o harnessOptions) (*harness, error) {
	w, err := world.New(world.Options{Dir: o.Dir, Configure: o.Configure, Emulator: o.Emulator, Shared: o.Shared})
	if err != nil {
		return nil, err
	}
	return &harness{world: w, emu: w.Emu, cfg: w.Cfg, guild: w.Guild, general: w.General, alice: w.Alice,
		log: o.Log, clock: o.Clock, prov: o.Provider, base: o.BaseTransport, typing: o.TypingAfter, live: o.LiveAfter, prepare: o.Prepare}, nil
}

// start builds and runs the bot; it returns once the gateway is ready.
func (h *harness) start(ctx context.Context) error {
	a, err := New(Options{Config: h.cfg, RetryBackoff: 10 * time.Millisecond, MCPBackoff: 100 * time.Millisecond},
		Deps{Log: h.log, Clock: h.clock, Provider: h.prov, BaseTransport: h.base, TypingAfter: h.typing, LiveAfter: h.live,
			BindingEnded: h.bindingEnded, wired: h.prepare})
	if err != nil {
		return err
	}
	h.app = a
	h.run, err = h.world.Start(ctx, a)
	return err
}

// stop stops the bot gracefully and waits for it.
func (h *harness) stop() error {
	if h.run == nil {
		return nil
	}
	err := h.run.Stop()
	h.run = nil
	return err
}

// close stops the bot and the emulator.
func (h *harness) close() error {
	return errors.Join(h.stop(), h.world.Close())
}

// waitFor blocks until cond holds, re-checking on every emulator change.
func (h *harness) waitFor(ctx context.Context, what string, cond func() bool) error {
	return h.world.WaitFor(ctx, what, cond)
}
