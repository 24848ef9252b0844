package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/demo"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/rs/zerolog"
)

// cmdDemo plays a short scripted story against the built-in emulator with
// the echo model and prints, per channel, what was displayed next to what
// the transcripts hold, then the invariant checks it ran.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "show the bot's logs")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	dir, err := os.MkdirTemp("", "agentbot-demo-")
	if err != nil {
		fmt.Fprintln(stderr, "bot demo:", err)
		return exitProblems
	}
	defer os.RemoveAll(dir)
	log := zerolog.Nop()
	if *verbose {
		log = bot.NewLogger(defaultLogConfig(), stderr, redact.New())
	}
	problems, err := demo.Play(ctx, dir, log, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "bot demo:", err)
		return exitProblems
	}
	if problems > 0 {
		return exitProblems
	}
	return exitOK
}

func defaultLogConfig() config.LogConfig { return config.LogConfig{Level: "info", Format: "console"} }
