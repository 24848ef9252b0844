package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/agentbot/agentbot"
	"github.com/agentbot/agentbot/adapter/discord"
	"github.com/agentbot/agentbot/config"
)

// setupOptions is what differs between `bot setup` and its tests.
type setupOptions struct {
	transport http.RoundTripper // under the adapter's rewriting transport
	stdin     *os.File          // a terminal to ask for the token (echo off); nil: never ask
}

// cmdSetup checks a bot token against Discord, says whether the Message
// Content intent is on, prints the invite URL (which feature needs which
// permission bit) and the guilds the bot is in, and writes config.yaml from
// the example with the token as ${DISCORD_TOKEN}, never the literal.
func cmdSetup(ctx context.Context, args []string, stdout, stderr io.Writer, o setupOptions) int {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	token := fs.String("token", "", "bot token (default $DISCORD_TOKEN; asked for on a terminal). Prefer the environment: flags show in ps")
	out := fs.String("config", "config.yaml", "config file to write")
	apiURL := fs.String("api-url", "", "Discord REST base URL (a REST proxy or the emulator); written to discord.apiURL")
	force := fs.Bool("force", false, "overwrite an existing config file")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	tok := *token
	if tok == "" {
		tok = os.Getenv("DISCORD_TOKEN")
	}
	if tok == "" && o.stdin != nil {
		fmt.Fprint(stdout, "Bot token (Developer Portal → your application → Bot → Reset Token; not shown): ")
		restore := noEcho(o.stdin)
		line, _ := bufio.NewReader(o.stdin).ReadString('\n')
		restore()
		fmt.Fprintln(stdout)
		tok = line
	}
	if strings.TrimSpace(tok) == "" {
		fmt.Fprintln(stderr, "bot setup: no token: pass -token, set DISCORD_TOKEN, or run it on a terminal")
		return exitUsage
	}
	if !*force {
		if _, err := os.Stat(*out); err == nil {
			fmt.Fprintf(stderr, "bot setup: %s exists; pass -force to overwrite it, or -config FILE\n", *out)
			return exitUsage
		}
	}
	c, err := discord.NewChecker(discord.CheckOptions{Token: tok, APIURL: *apiURL, BaseTransport: o.transport})
	if err != nil {
		fmt.Fprintln(stderr, "bot setup:", err)
		return exitUsage
	}
	_, name, err := c.Me(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bot setup:", err)
		if errors.Is(err, discord.ErrBadToken) {
			return exitUsage
		}
		return exitProblems
	}
	fmt.Fprintf(stdout, "✔ token is valid: bot %s\n", name)
	app, err := c.Application(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bot setup:", err)
		return exitProblems
	}
	if app.MessageContent() {
		fmt.Fprintln(stdout, "✔ Message Content intent is enabled")
	} else {
		fmt.Fprintln(stdout, "✘ Message Content intent is OFF: the bot would see empty messages (and Discord refuses its gateway login)")
		fmt.Fprintln(stdout, "  fix:", discord.MessageContentFix(app.ID))
	}
	fmt.Fprintln(stdout, "\nInvite the bot to a server with this URL:")
	fmt.Fprintln(stdout, " ", discord.InviteURL(app.ID))
	fmt.Fprintf(stdout, "  permissions=%d is:\n", discord.InvitePermissions())
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, p := range discord.Permissions {
		note := ""
		if p.Threads {
			note = " (thread bindings)"
		}
		if p.Optional {
			note = " (optional)"
		}
		fmt.Fprintf(tw, "    1<<%d\t%s\t%s%s\n", bitIndex(p.Bit), p.Name, p.Feature, note)
	}
	_ = tw.Flush()
	guilds, err := c.Guilds(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bot setup:", err)
		return exitProblems
	}
	if len(guilds) == 0 {
		fmt.Fprintln(stdout, "\nThe bot is in no server yet: open the URL above.")
	} else {
		fmt.Fprintf(stdout, "\nThe bot is in %d server(s):\n", len(guilds))
		for _, g := range guilds {
			fmt.Fprintf(stdout, "  %s  %s\n", g.ID, g.Name)
		}
	}
	data, err := setupConfig(*apiURL)
	if err != nil {
		fmt.Fprintln(stderr, "bot setup:", err)
		return exitProblems
	}
	if err := os.WriteFile(*out, data, 0o600); err != nil {
		fmt.Fprintln(stderr, "bot setup: write config:", err)
		return exitProblems
	}
	fmt.Fprintf(stdout, "\n✔ wrote %s (discord.token: ${DISCORD_TOKEN}; the token itself is not in the file)\n", *out)
	fmt.Fprintln(stdout, "\nNext, with DISCORD_TOKEN set in the environment (export DISCORD_TOKEN=<your token>):")
	fmt.Fprintf(stdout, "  bot doctor -live -config %s\n", *out)
	fmt.Fprintf(stdout, "  bot run -config %s\n", *out)
	return exitOK
}

// setupConfig is the example config, with discord.apiURL set when given.
// It must load and, with DISCORD_TOKEN set, pass `bot run`'s validation.
func setupConfig(apiURL string) ([]byte, error) {
	data := string(agentbot.ConfigExample)
	if !strings.Contains(data, "\n  token: ${DISCORD_TOKEN}\n") {
		return nil, errors.New("config.example.yaml no longer has `token: ${DISCORD_TOKEN}`")
	}
	if apiURL != "" {
		const line = "\n  apiURL: \"\"\n"
		if !strings.Contains(data, line) {
			return nil, errors.New("config.example.yaml no longer has `apiURL: \"\"`")
		}
		data = strings.Replace(data, line, "\n  apiURL: "+strconv.Quote(apiURL)+"\n", 1)
	}
	if _, err := config.LoadBytes("config.yaml", []byte(data), func(string) (string, bool) { return "x", true }); err != nil {
		return nil, fmt.Errorf("the generated config does not load: %w", err)
	}
	return []byte(data), nil
}

func bitIndex(b int64) int {
	for i := 0; i < 63; i++ {
		if b == 1<<i {
			return i
		}
	}
	return -1
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
