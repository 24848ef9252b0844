package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/model"
)

// harness runs the real wiring against the built-in Discord emulator: the
// demo and the end-to-end tests use it. Nothing in it talks to the network
// beyond 127.0.0.1.
type harness struct {
	emu     *discordtest.Emulator
	cfg     *config.Config
	app     *app
	log     zerolog.Logger
	clock   clock.Clock
	guild   discordtest.Guild
	general discordtest.Channel
	alice   discordtest.User
	prov    model.Provider
	base    http.RoundTripper
	shared  bool // the emulator belongs to the caller: not seeded, started or closed here

	cancel context.CancelFunc
	done   chan error
	// refused names user messages a test expects discord.access to refuse
	// (never routed, so in no transcript: finishBot's Rule 1 check skips them).
	refused map[string]bool
	typing  session.After
	live    func(time.Duration) <-chan time.Time
	prepare func(*app)
	lag     func(time.Duration)
}

// commandsRoute is where the bot registers its slash commands at start
// (guildCommandsRoute with a guild allowlist).
const (
	commandsRoute      = "/applications/{application_id}/commands"
	guildCommandsRoute = "/applications/{application_id}/guilds/{guild_id}/commands"
)

// registrations counts the bot's command registrations so far.
func (h *harness) registrations() int {
	return len(h.emu.RequestsTo("PUT", commandsRoute)) + len(h.emu.RequestsTo("PUT", guildCommandsRoute))
}

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
	// Prepare, if set, sees the wired app before it runs (tests replace
	// a component with a faulty one).
	Prepare func(*app)
	// IndexLag, if set, gets the recall index's lag per new entry.
	IndexLag func(time.Duration)
}

// newHarness starts the emulator and seeds a guild with #general and alice.
func newHarness(o harnessOptions) (*harness, error) {
	if o.Shared != nil {
		return configureHarness(o, o.Shared, discordtest.Guild{}, discordtest.Channel{}, discordtest.User{})
	}
	emu := discordtest.New(o.Emulator)
	g := emu.AddGuild("demo")
	general, err := emu.AddTextChannel(g.ID, "general")
	if err != nil {
		return nil, err
	}
	alice, err := emu.AddMember(g.ID, "alice")
	if err != nil {
		return nil, err
	}
	if err := emu.Start(); err != nil {
		return nil, err
	}
	return configureHarness(o, emu, g, general, alice)
}

func configureHarness(o harnessOptions, emu *discordtest.Emulator, g discordtest.Guild, general discordtest.Channel, alice discordtest.User) (*harness, error) {
	cfg := config.Default()
	cfg.Discord.Token = emu.Token()
	cfg.Discord.APIURL = emu.URL()
	cfg.Discord.ThreadBindings.SpawnSubagentSessions = true
	cfg.Store.Path = filepath.Join(o.Dir, "bot.db")
	cfg.HTTP.Listen = ""
	if o.Configure != nil {
		o.Configure(cfg)
	}
	if err := cfg.ValidateForRun(); err != nil {
		if o.Shared == nil {
			emu.Close()
		}
		return nil, err
	}
	h := &harness{emu: emu, cfg: cfg, log: o.Log, clock: o.Clock, guild: g, general: general, alice: alice, prov: o.Provider, base: o.BaseTransport, shared: o.Shared != nil, typing: o.TypingAfter, live: o.LiveAfter, prepare: o.Prepare, lag: o.IndexLag}
	return h, nil
}

// start builds and runs the bot; it returns once the gateway is ready.
func (h *harness) start(ctx context.Context) error {
	a, err := newApp(h.cfg, h.log, appOptions{Clock: h.clock, RetryBackoff: 10 * time.Millisecond, Provider: h.prov, BaseTransport: h.base, TypingAfter: h.typing, LiveAfter: h.live, MCPBackoff: 100 * time.Millisecond, IndexLag: h.lag})
	if err != nil {
		return err
	}
	h.app = a
	if h.prepare != nil {
		h.prepare(a)
	}
	puts := h.registrations()
	rctx, cancel := context.WithCancel(ctx)
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- a.Run(rctx) }()
	if a.gateway == nil {
		return nil // on Matrix only: nothing to wait for on Discord
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := h.emu.Wait(wctx, func() bool { return h.registrations() > puts }); err != nil {
		return fmt.Errorf("bot did not register its commands: %w", err)
	}
	select {
	case err := <-h.done:
		return fmt.Errorf("bot stopped: %w", err)
	case <-wctx.Done():
		return errors.New("bot did not become ready")
	case <-a.gateway.Connected():
	}
	if h.shared { // other bots heartbeat too: wait for every session's first
		return h.emu.Wait(wctx, func() bool {
			for _, n := range h.emu.SessionHeartbeats() {
				if n == 0 {
					return false
				}
			}
			return true
		})
	}
	return h.emu.WaitHeartbeats(wctx, 1)
}

// stop stops the bot gracefully and waits for it.
func (h *harness) stop() error {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	err := <-h.done
	h.cancel = nil
	return err
}

// close stops the bot and the emulator.
func (h *harness) close() error {
	err := h.stop()
	if h.shared {
		return err
	}
	return errors.Join(err, h.emu.Close())
}

// waitFor blocks until cond holds, re-checking on every emulator change.
func (h *harness) waitFor(ctx context.Context, what string, cond func() bool) error {
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := h.emu.Wait(wctx, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
