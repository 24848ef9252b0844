package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/store/bolt"
)

// cmdInspect is `bot inspect`: a read-only view of the store, asked of the
// running bot over HTTP when it holds the store's lock.
func cmdInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: bot inspect bindings|jobs|runs [JOB]|transcript KEY|tools [AGENT]|usage [-since 7d] [-config FILE] [-json]")
		return exitUsage
	}
	what := args[0]
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "one JSON object per line")
	since := fs.String("since", "7d", "usage: records of this last period (7d, 36h)")
	// Positional arguments may come before or after the flags.
	var pos []string
	rest := args[1:]
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	cfg, code := loadConfig(fs, rest, stderr)
	if cfg == nil {
		return code
	}
	pos = append(pos, fs.Args()...)
	if what == "usage" {
		d, err := bot.ParseSince(*since)
		if err != nil {
			fmt.Fprintln(stderr, "bot:", err)
			return exitUsage
		}
		pos = []string{time.Now().Add(-d).UTC().Format(time.RFC3339Nano)}
	}
	if what == "tools" {
		// From the config: starts the agent's MCP servers once to list their tools.
		return inspectExit(bot.InspectTools(ctx, cfg, pos, redact.New(cfg.Secrets()...).Writer(stdout), *asJSON), stderr)
	}
	st, err := bot.OpenStore(ctx, cfg.Store, 200*time.Millisecond)
	if errors.Is(err, bolt.ErrLocked) && cfg.HTTP.Enabled() {
		// The bot is running: ask it.
		err = inspectRemote(ctx, cfg.HTTP.Listen, cfg.HTTP.Token, what, pos, *asJSON, stdout)
		return inspectExit(err, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bot:", err)
		return exitUsage
	}
	defer st.Close()
	return inspectExit(bot.Inspect(ctx, st, redact.New(cfg.Secrets()...), stdout, what, pos, *asJSON), stderr)
}

func inspectExit(err error, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintln(stderr, "bot:", err)
		return exitProblems
	}
	return exitOK
}

// inspectRemote reads a view from the running bot's /inspect endpoint.
func inspectRemote(ctx context.Context, listen, token, what string, args []string, asJSON bool, w io.Writer) error {
	q := url.Values{"arg": args}
	if asJSON {
		q.Set("json", "1")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/inspect/"+url.PathEscape(what)+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the store is locked by a running bot, and its HTTP endpoint did not answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return errors.New(strings.TrimSpace(string(body)))
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
