package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentbot/agentbot/store/bolt"
	"github.com/agentbot/agentbot/store/migrate"
	"github.com/agentbot/agentbot/store/postgres"
)

// migrate-store copies bbolt into PostgreSQL; any pair of stores with these methods would do.
var (
	_ migrate.Source = (*bolt.Store)(nil)
	_ migrate.Target = (*postgres.Store)(nil)
)

// cmdMigrateStore is `bot migrate-store [-config FILE] [-to DSN]`: it copies
// the bbolt store at store.path into an empty PostgreSQL database (-to, or
// store.dsn) and prints what it copied. The bot must be stopped (the bolt
// file is locked while it runs).
func cmdMigrateStore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate-store", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "PostgreSQL DSN to copy into (default: store.dsn)")
	cfg, code := loadConfig(fs, args, stderr)
	if cfg == nil {
		return code
	}
	dsn := *to
	if dsn == "" {
		dsn = cfg.Store.DSN
	}
	if dsn == "" {
		fmt.Fprintln(stderr, "bot: migrate-store: name the PostgreSQL database with -to DSN (or store.dsn in the config)")
		return exitUsage
	}
	path := cfg.Store.Path
	if _, err := os.Stat(path); err != nil {
		fmt.Fprintf(stderr, "bot: migrate-store: bolt store %s (store.path): %v\n", path, err)
		return exitUsage
	}
	src, err := bolt.Open(path, bolt.Options{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			fmt.Fprintf(stderr, "bot: migrate-store: %v; stop the bot first\n", err)
		} else {
			fmt.Fprintln(stderr, "bot: migrate-store:", err)
		}
		return exitUsage
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		fmt.Fprintln(stderr, "bot: migrate-store:", err)
		if errors.Is(err, postgres.ErrSchemaTooNew) {
			return exitUsage
		}
		return exitProblems
	}
	defer dst.Close()
	rep, err := migrate.Copy(ctx, src, dst)
	if err != nil {
		fmt.Fprintln(stderr, "bot: migrate-store:", err)
		return exitProblems
	}
	fmt.Fprintf(stdout, "copied %s into PostgreSQL (schema version %d):\n", path, dst.SchemaVersion())
	writeReport(stdout, rep)
	return exitOK
}

// writeReport prints what migrate.Copy copied.
func writeReport(w io.Writer, r migrate.Report) {
	fmt.Fprintf(w, "  bindings     %d\n", r.Bindings)
	fmt.Fprintf(w, "  transcripts  %d sessions, %d entries (seqs and generations kept)\n", r.Sessions, r.Entries)
	fmt.Fprintf(w, "  deliveries   %d\n", r.Deliveries)
	fmt.Fprintf(w, "  sessions     %d\n", r.SessionInfos)
	fmt.Fprintf(w, "  jobs         %d\n", r.Jobs)
	fmt.Fprintf(w, "  runs         %d\n", r.Runs)
	fmt.Fprintf(w, "  ledger       %d (newest scheduled instant per job, from its run history)\n", r.Ledger)
	fmt.Fprintf(w, "  webhooks     %d (of %d channels known from bindings, deliveries, sessions and jobs)\n", r.Webhooks, r.ChannelsProbed)
	fmt.Fprintf(w, "  usage        %d records\n", r.Usage)
	fmt.Fprintf(w, "  processes    %d (running child process groups, reaped by the next start on their host)\n", r.Processes)
}
