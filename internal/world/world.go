// Package world is the built-in Discord emulator seeded for a bot (a
// guild, #general and alice) with a config serving it, and a bot run in
// it that is ready once the gateway is connected: the e2e tests, `bot demo`
// and `bot load` run the application in it. Nothing here talks to the
// network beyond 127.0.0.1. It imports nothing of the application (the
// application's own tests use it): Start runs whatever App it is given.
package world

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
)

// World is an emulator with a guild, #general and alice, and a config for
// a bot on it.
type World struct {
	Emu     *discordtest.Emulator
	Cfg     *config.Config
	Guild   discordtest.Guild
	General discordtest.Channel
	Alice   discordtest.User
	shared  bool
}

// Options adjust the world and the config.
type Options struct {
	Dir       string // store directory
	Configure func(*config.Config)
	Emulator  discordtest.Options
	// Shared, when set, is a started emulator several worlds use (one per
	// shard process); it is not seeded and Close leaves it running.
	Shared *discordtest.Emulator
}

// New starts the emulator and seeds a guild with #general and alice.
func New(o Options) (*World, error) {
	if o.Shared != nil {
		return On(o, o.Shared, discordtest.Guild{}, discordtest.Channel{}, discordtest.User{})
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
	return On(o, emu, g, general, alice)
}

// On is a world over an emulator the caller seeded and started; a bad
// config closes the emulator unless it is shared.
func On(o Options, emu *discordtest.Emulator, g discordtest.Guild, general discordtest.Channel, alice discordtest.User) (*World, error) {
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
	return &World{Emu: emu, Cfg: cfg, Guild: g, General: general, Alice: alice, shared: o.Shared != nil}, nil
}

// CommandsRoute is where the bot registers its slash commands at start
// (guildCommandsRoute with a guild allowlist).
const (
	CommandsRoute      = "/applications/{application_id}/commands"
	guildCommandsRoute = "/applications/{application_id}/guilds/{guild_id}/commands"
)

// registrations counts the bot's command registrations so far.
func (w *World) registrations() int {
	return len(w.Emu.RequestsTo("PUT", CommandsRoute)) + len(w.Emu.RequestsTo("PUT", guildCommandsRoute))
}

// App is what a world runs: the application.
type App interface {
	Run(ctx context.Context) error
	// Started is closed once Run built every component.
	Started() <-chan struct{}
	// Connected is closed once the Discord gateway's session is up.
	Connected() <-chan struct{}
}

// Run is an App running in a world.
type Run struct {
	cancel  context.CancelFunc
	stopped chan struct{}
	err     error // Run's result, once stopped is closed
}

// Go runs a until Stop, without waiting for anything.
func Go(ctx context.Context, a App) *Run {
	rctx, cancel := context.WithCancel(ctx)
	r := &Run{cancel: cancel, stopped: make(chan struct{})}
	go func() { r.err = a.Run(rctx); close(r.stopped) }()
	return r
}

// Start runs a and returns once it started (its components are built),
// registered its commands, connected and heartbeat (on Matrix only: once
// it started). On an error a is stopped.
func (w *World) Start(ctx context.Context, a App) (*Run, error) {
	puts := w.registrations()
	r := Go(ctx, a)
	if err := w.ready(ctx, a, r, puts); err != nil {
		_ = r.Stop()
		return nil, err
	}
	return r, nil
}

func (w *World) ready(ctx context.Context, a App, r *Run, puts int) error {
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	select {
	case <-r.stopped:
		return fmt.Errorf("bot stopped: %w", r.err)
	case <-wctx.Done():
		return errors.New("bot did not start")
	case <-a.Started():
	}
	if !w.Cfg.DiscordOn() {
		return nil // on Matrix only: nothing to wait for on Discord
	}
	if err := w.Emu.Wait(wctx, func() bool { return w.registrations() > puts }); err != nil {
		return fmt.Errorf("bot did not register its commands: %w", err)
	}
	select {
	case <-r.stopped:
		return fmt.Errorf("bot stopped: %w", r.err)
	case <-wctx.Done():
		return errors.New("bot did not become ready")
	case <-a.Connected():
	}
	if w.shared { // other bots heartbeat too: wait for every session's first
		return w.Emu.Wait(wctx, func() bool {
			for _, n := range w.Emu.SessionHeartbeats() {
				if n == 0 {
					return false
				}
			}
			return true
		})
	}
	return w.Emu.WaitHeartbeats(wctx, 1)
}

// Stopped is closed once the App stopped (by Stop or by itself); Stop
// then returns its result.
func (r *Run) Stopped() <-chan struct{} { return r.stopped }

// Stop stops the App gracefully, waits for it and returns Run's result.
func (r *Run) Stop() error {
	r.cancel()
	<-r.stopped
	return r.err
}

// Close closes the emulator unless it is shared.
func (w *World) Close() error {
	if w.shared {
		return nil
	}
	return w.Emu.Close()
}

// WaitFor blocks until cond holds, re-checking on every emulator change.
func (w *World) WaitFor(ctx context.Context, what string, cond func() bool) error {
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := w.Emu.Wait(wctx, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
