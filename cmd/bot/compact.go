package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentbot/agentbot/store/bolt"
)

// cmdCompact rewrites the bolt store (store.path) without its freed pages,
// so the erased text of deleted messages is gone from the file (README,
// "Edits and deletions"). The bot must be stopped.
func cmdCompact(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, code := loadConfig(fs, args, stderr)
	if cfg == nil {
		return code
	}
	if cfg.Store.Driver == "postgres" {
		fmt.Fprintln(stderr, "bot: compact: the store is PostgreSQL (store.dsn); run VACUUM on it instead")
		return exitUsage
	}
	before, after, err := bolt.Compact(cfg.Store.Path, 200*time.Millisecond)
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			fmt.Fprintf(stderr, "bot: compact: %v; stop the bot first\n", err)
			return exitUsage
		}
		fmt.Fprintln(stderr, "bot: compact:", err)
		return exitProblems
	}
	fmt.Fprintf(stdout, "compacted %s: %d -> %d bytes\n", cfg.Store.Path, before, after)
	return exitOK
}
