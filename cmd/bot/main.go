// Command bot is a Discord bot for AI agent sessions whose chats and
// model-visible transcripts never disagree.
//
// Usage:
//
//	bot setup   [-token T] [-config FILE]  check a token, print the invite URL, write config.yaml
//	bot run     [-config FILE]          run the bot
//	bot demo                            play a scripted story against the built-in Discord emulator
//	bot doctor  [-config FILE] [-fix] [-live]  validate config and store, migrate jobs; -live asks Discord
//	bot backup  FILE [-config FILE]     consistent copy of the bbolt store (of a running bot too)
//	bot inspect bindings|jobs|runs [JOB]|transcript KEY|usage [-since 7d] [-config FILE] [-json]
//	bot load    [-profile P]            the load harness against the built-in emulator (make load)
//	bot reindex [-config FILE]          rebuild the recall index from the transcripts
//	bot version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/store/bolt"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK       = 0
	exitProblems = 1 // doctor found problems, inspect found nothing, runtime failure
	exitUsage    = 2 // bad flags, bad config, locked store
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if args[0] == bot.RelayCommand { // inside an agent's sandbox (not for people)
		return bot.RelayMain(args[1:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stderr)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr)
	case "doctor":
		return cmdDoctor(ctx, args[1:], stdout, stderr)
	case "inspect":
		return cmdInspect(ctx, args[1:], stdout, stderr)
	case "audit":
		return cmdAudit(ctx, args[1:], stdout, stderr)
	case "setup":
		o := setupOptions{}
		if isTerminal(os.Stdin) {
			o.stdin = os.Stdin
		}
		return cmdSetup(ctx, args[1:], stdout, stderr, o)
	case "backup":
		return cmdBackup(ctx, args[1:], stdout, stderr)
	case "healthcheck":
		return cmdHealthcheck(ctx, args[1:], stdout, stderr)
	case "migrate-store":
		return cmdMigrateStore(ctx, args[1:], stdout, stderr)
	case "compact":
		return cmdCompact(ctx, args[1:], stdout, stderr)
	case "reindex":
		return cmdReindex(ctx, args[1:], stdout, stderr)
	case "load":
		return cmdLoad(ctx, args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "bot", version)
		return exitOK
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "bot: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  bot setup   [-token T] [-config FILE] [-force]   check the token ($DISCORD_TOKEN), print the invite URL, write config.yaml
  bot run     [-config FILE]          run the bot (needs discord.token / DISCORD_TOKEN)
  bot demo                            scripted story against the built-in Discord emulator (no token)
  bot doctor  [-config FILE] [-fix] [-live]   validate config and store; migrate jobs; -live: what the bot may do on Discord
  bot backup  FILE [-config FILE]     consistent, verified copy of the bbolt store (a running bot's needs http.token)
  bot inspect bindings|jobs|runs [JOB]|transcript KEY|usage [-since 7d] [-config FILE] [-json]
  bot audit   CHANNEL|all [-config FILE] [-json]   compare what the chat displays now with the transcripts (exit 1 on a difference)
  bot migrate-store [-config FILE] -to DSN   copy the bolt store (store.path) into an empty PostgreSQL database
  bot healthcheck [-config FILE]      ask the running bot's /healthz (the container HEALTHCHECK)
  bot compact [-config FILE]          rewrite the bolt store without freed pages (deleted text gone from the file)
  bot reindex [-config FILE]          rebuild the recall index (memory.enabled) from the transcripts
  bot load [-profile standard|saturation|hot429|deadmodel|usage|memory|custom]   load harness against the built-in emulator (make load)
  bot version
`)
}

// loadConfig parses -config and loads the file; it prints the error and
// returns exitUsage on failure.
func loadConfig(fs *flag.FlagSet, args []string, stderr io.Writer) (*config.Config, int) {
	path := fs.String("config", "config.yaml", "config file")
	if err := fs.Parse(args); err != nil {
		return nil, exitUsage
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, "bot:", err)
		return nil, exitUsage
	}
	return cfg, exitOK
}

func cmdRun(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, code := loadConfig(fs, args, stderr)
	if cfg == nil {
		return code
	}
	if err := cfg.ValidateForRun(); err != nil {
		fmt.Fprintln(stderr, "bot:", err)
		return exitUsage
	}
	red := redact.New(cfg.Secrets()...)
	log := bot.NewLogger(cfg.Log, stderr, red)
	a, err := bot.New(bot.Options{Config: cfg}, bot.Deps{Log: log, Redactor: red})
	if err != nil {
		fmt.Fprintln(stderr, "bot:", red.Error(err))
		return runExit(err)
	}
	log.Info().Str("version", version).Str("store", cfg.Store.Path).Msg("starting")
	go bot.LogLiveFindings(ctx, cfg, nil, log) // the same findings as bot doctor -live, once, as warnings
	go reloadOnHUP(ctx, configPath(fs), a, log, red)
	if err := a.Run(ctx); err != nil {
		log.Error().Err(err).Msg("stopped with an error")
		select {
		case <-a.Started():
		default: // refused at start (the store, the config): said on stderr too
			fmt.Fprintln(stderr, "bot:", red.Error(err))
		}
		return runExit(err)
	}
	log.Info().Msg("stopped")
	return exitOK
}

// runExit is the exit status of `bot run` failing with err: a locked store
// or a config the application refuses is a usage problem (2).
func runExit(err error) int {
	if errors.Is(err, bolt.ErrLocked) || errors.Is(err, config.ErrInvalid) {
		return exitUsage
	}
	return exitProblems
}

// configPath is the -config value a FlagSet parsed.
func configPath(fs *flag.FlagSet) string { return fs.Lookup("config").Value.String() }

// reloadOnHUP re-reads the config on SIGHUP and applies what can change
// while running: the bot token (every later REST call uses it, through the
// same thread and webhook managers, and the gateway re-identifies with it). Other changes need a restart, and the
// log says so. A bad file is reported and changes nothing.
func reloadOnHUP(ctx context.Context, path string, a *bot.App, log zerolog.Logger, red *redact.Redactor) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	select { // a SIGHUP before then waits in hup
	case <-ctx.Done():
		return
	case <-a.Started():
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			cfg, err := config.Load(path)
			if err == nil {
				err = cfg.ValidateForRun()
			}
			if err != nil {
				log.Error().Err(err).Msg("config reload refused; keeping the running config")
				continue
			}
			red.Add(cfg.Secrets()...) // a rotated token is a secret from now on
			a.SetToken(cfg.Discord.Token)
			if !a.SetMemory(cfg.Memory.Enabled) {
				log.Warn().Msg("memory.enabled: turning memory on takes a restart (no index is open)")
			}
			a.SetNotes(cfg.Memory.NotesOn())
			log.Info().Msg("config reloaded: token, memory.enabled and memory.notes applied; other changes take effect after a restart")
		}
	}
}
