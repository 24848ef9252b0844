package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/store/bolt"
)

// cmdAudit is `bot audit [-config FILE] CHANNEL|all [-json]`: exit 0 when
// the transcripts hold what the chat displays, 1 on any difference (one
// line or JSON object each, naming the message id) or a conversation that
// cannot be read, 2 on bad usage, config or a locked store.
func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "one JSON object per difference")
	var pos []string
	rest := args
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	cfg, code := loadConfig(fs, rest, stderr)
	if cfg == nil {
		return code
	}
	if pos = append(pos, fs.Args()...); len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: bot audit [-config FILE] CHANNEL|all [-json] (CHANNEL: a Discord channel or thread id, a Matrix room id)")
		return exitUsage
	}
	st, err := bot.OpenStore(ctx, cfg.Store, 200*time.Millisecond)
	if errors.Is(err, bolt.ErrLocked) {
		fmt.Fprintln(stderr, "bot: the store is locked by a running bot: stop it first, or see its console's conversation view and audit.every")
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(stderr, "bot:", err)
		return exitUsage
	}
	defer st.Close()
	red := redact.New(cfg.Secrets()...)
	n, err := bot.Audit(ctx, cfg, st, pos[0], red.Writer(stdout), *asJSON)
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "bot:", red.String(err.Error()))
		return exitProblems
	case n > 0:
		return exitProblems
	}
	return exitOK
}
