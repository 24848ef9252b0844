package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/bolt"
	"github.com/agentbot/agentbot/store/postgres"
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
	rep, err := migrateStore(ctx, src, dst)
	if err != nil {
		fmt.Fprintln(stderr, "bot: migrate-store:", err)
		return exitProblems
	}
	fmt.Fprintf(stdout, "copied %s into PostgreSQL (schema version %d):\n", path, dst.SchemaVersion())
	rep.write(stdout)
	return exitOK
}

// migrateReport counts what migrateStore copied.
type migrateReport struct {
	Bindings, Sessions, Entries, Deliveries, SessionInfos, Jobs, Runs, Ledger, Webhooks int
	ChannelsProbed                                                                      int
}

func (r migrateReport) write(w io.Writer) {
	fmt.Fprintf(w, "  bindings     %d\n", r.Bindings)
	fmt.Fprintf(w, "  transcripts  %d sessions, %d entries (seqs and generations kept)\n", r.Sessions, r.Entries)
	fmt.Fprintf(w, "  deliveries   %d\n", r.Deliveries)
	fmt.Fprintf(w, "  sessions     %d\n", r.SessionInfos)
	fmt.Fprintf(w, "  jobs         %d\n", r.Jobs)
	fmt.Fprintf(w, "  runs         %d\n", r.Runs)
	fmt.Fprintf(w, "  ledger       %d (newest scheduled instant per job, from its run history)\n", r.Ledger)
	fmt.Fprintf(w, "  webhooks     %d (of %d channels known from bindings, deliveries, sessions and jobs)\n", r.Webhooks, r.ChannelsProbed)
}

// migrateStore copies every record readable through the store interfaces
// from src into dst, which must be empty. On an error dst holds a partial
// copy: empty it (or use a fresh database) before trying again.
//
// Two kinds are not listable through the interfaces and are rebuilt:
// the instant ledger is seeded per job with the newest ScheduledAt of its
// scheduled (not manual) runs, which is the instant the bolt ledger holds
// unless the bot crashed between claiming an instant and recording its run;
// webhooks are looked up for every channel id the bindings, deliveries and
// session records name (a webhook of a channel named nowhere is not copied
// and the adapter creates a new one when it needs it).
func migrateStore(ctx context.Context, src *bolt.Store, dst *postgres.Store) (migrateReport, error) {
	var rep migrateReport
	counts, err := dst.Counts(ctx)
	if err != nil {
		return rep, err
	}
	var nonEmpty []string
	for _, t := range postgres.Tables {
		if counts[t] > 0 {
			nonEmpty = append(nonEmpty, fmt.Sprintf("%s: %d", t, counts[t]))
		}
	}
	if len(nonEmpty) > 0 {
		return rep, fmt.Errorf("the target database is not empty (%s); migrate-store copies only into an empty database",
			strings.Join(nonEmpty, ", "))
	}
	channels := map[string]bool{}
	addChannel := func(ids ...string) {
		for _, id := range ids {
			if id = strings.TrimPrefix(id, "channel:"); id != "" && !strings.HasPrefix(id, "user:") {
				channels[id] = true
			}
		}
	}

	bs, err := src.Bindings(ctx)
	if err != nil {
		return rep, fmt.Errorf("read bindings: %w", err)
	}
	for chunk := range slices.Chunk(bs, 500) {
		if err := dst.PutBindings(ctx, chunk...); err != nil {
			return rep, fmt.Errorf("copy bindings: %w", err)
		}
	}
	for _, b := range bs {
		addChannel(b.Conversation.ConversationID, b.Conversation.ParentConversationID)
	}
	rep.Bindings = len(bs)

	keys, err := src.Sessions(ctx)
	if err != nil {
		return rep, fmt.Errorf("read transcripts: %w", err)
	}
	for _, key := range keys {
		for from := uint64(1); ; {
			es, err := src.Range(ctx, key, from, 1000)
			if err != nil {
				return rep, fmt.Errorf("read transcript %s: %w", key, err)
			}
			if len(es) == 0 {
				break
			}
			if err := dst.ImportEntries(ctx, key, es); err != nil {
				return rep, fmt.Errorf("copy transcript %s: %w", key, err)
			}
			rep.Entries += len(es)
			from = es[len(es)-1].Seq + 1
		}
		gen, err := src.Generation(ctx, key)
		if err != nil {
			return rep, fmt.Errorf("read generation of %s: %w", key, err)
		}
		if err := dst.SetGeneration(ctx, key, gen); err != nil {
			return rep, fmt.Errorf("copy generation of %s: %w", key, err)
		}
		rep.Sessions++
	}

	ds, err := src.Deliveries(ctx, "", 0)
	if err != nil {
		return rep, fmt.Errorf("read deliveries: %w", err)
	}
	for _, d := range ds {
		if err := dst.PutDelivery(ctx, d); err != nil {
			return rep, fmt.Errorf("copy delivery %s: %w", d.Delivery.ID, err)
		}
		addChannel(d.Delivery.Target.ConversationID, d.Delivery.Target.ParentConversationID)
	}
	rep.Deliveries = len(ds)

	infos, err := src.SessionInfos(ctx)
	if err != nil {
		return rep, fmt.Errorf("read sessions: %w", err)
	}
	for _, in := range infos {
		if err := dst.PutSessionInfo(ctx, in); err != nil {
			return rep, fmt.Errorf("copy session %s: %w", in.Key, err)
		}
		addChannel(in.Thread, in.Requester.ConversationID, in.Requester.ParentConversationID)
	}
	rep.SessionInfos = len(infos)

	jobs, err := src.Jobs(ctx)
	if err != nil {
		return rep, fmt.Errorf("read jobs: %w", err)
	}
	for _, j := range jobs {
		if err := dst.PutJob(ctx, j); err != nil {
			return rep, fmt.Errorf("copy job %s: %w", j.ID, err)
		}
		addChannel(j.To, j.CreatedIn.ConversationID, j.CreatedIn.ParentConversationID)
		runs, err := src.Runs(ctx, j.ID, 0)
		if err != nil {
			return rep, fmt.Errorf("read runs of job %s: %w", j.ID, err)
		}
		var newest time.Time
		for _, r := range runs {
			if err := dst.PutRun(ctx, r, 0); err != nil {
				return rep, fmt.Errorf("copy run %s/%s: %w", r.JobID, r.RunID, err)
			}
			if r.Trigger != scheduler.TriggerManual && !r.ScheduledAt.IsZero() && r.ScheduledAt.After(newest) {
				newest = r.ScheduledAt
			}
		}
		rep.Runs += len(runs)
		if !newest.IsZero() {
			if _, err := dst.ClaimInstant(ctx, j.ID, newest); err != nil {
				return rep, fmt.Errorf("copy ledger of job %s: %w", j.ID, err)
			}
			rep.Ledger++
		}
	}
	rep.Jobs = len(jobs)

	rep.ChannelsProbed = len(channels)
	for _, ch := range slices.Sorted(maps.Keys(channels)) {
		id, token, ok, err := src.Webhook(ctx, ch)
		if err != nil {
			return rep, fmt.Errorf("read webhook of channel %s: %w", ch, err)
		}
		if !ok {
			continue
		}
		if err := dst.PutWebhook(ctx, ch, id, token); err != nil {
			return rep, fmt.Errorf("copy webhook of channel %s: %w", ch, err)
		}
		rep.Webhooks++
	}

	// What the target holds must be what was copied.
	after, err := dst.Counts(ctx)
	if err != nil {
		return rep, err
	}
	for t, want := range map[string]int{"bindings": rep.Bindings, "transcript_sessions": rep.Sessions,
		"transcript_entries": rep.Entries, "deliveries": rep.Deliveries, "session_infos": rep.SessionInfos,
		"jobs": rep.Jobs, "job_runs": rep.Runs, "job_ledger": rep.Ledger, "webhooks": rep.Webhooks} {
		if after[t] != int64(want) {
			return rep, fmt.Errorf("after the copy %s holds %d rows, want %d", t, after[t], want)
		}
	}
	return rep, nil
}
