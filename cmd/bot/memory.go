package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/store/bolt"
)

// cmdReindex rebuilds the recall index from the transcripts (`bot
// reindex`). On bbolt the bot must be stopped (the file is locked); the
// rebuilt directory holds no deleted text (like `bot compact` for the
// store file).
func cmdReindex(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reindex", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, code := loadConfig(fs, args, stderr)
	if cfg == nil {
		return code
	}
	if !cfg.Memory.Enabled {
		fmt.Fprintln(stderr, "bot: reindex: memory.enabled is false: there is no index to rebuild")
		return exitUsage
	}
	st, err := bot.OpenStore(ctx, cfg.Store, 200*time.Millisecond)
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			fmt.Fprintf(stderr, "bot: reindex: %v; stop the bot first\n", err)
			return exitUsage
		}
		fmt.Fprintln(stderr, "bot: reindex:", err)
		return exitProblems
	}
	defer st.Close()
	idx, closeIdx, err := bot.OpenRecallIndex(st)
	if err != nil {
		fmt.Fprintln(stderr, "bot: reindex:", err)
		return exitProblems
	}
	defer closeIdx() //nolint:errcheck // read-only use after the rebuild
	emb, err := bot.OpenRecallEmbeddings(cfg, st)
	if err != nil {
		fmt.Fprintln(stderr, "bot: reindex:", err)
		return exitProblems
	}
	deps := memory.IndexerDeps{Feed: st, Entries: st, Index: idx, Log: zerolog.Nop()}
	if emb != nil {
		deps.Vectors, deps.Embedder = emb.Vectors, emb.Embedder
	}
	start := time.Now()
	ix := memory.NewIndexer(memory.IndexerOptions{}, deps)
	n, err := ix.Rebuild(ctx)
	for err == nil {
		var k int
		if k, err = ix.Step(ctx); k == 0 {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "bot: reindex:", err)
		return exitProblems
	}
	stats, err := idx.Stats(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bot: reindex:", err)
		return exitProblems
	}
	fmt.Fprintf(stdout, "reindexed %d entries in %s: %d documents, %d bytes\n", n, time.Since(start).Round(time.Millisecond), stats.Docs, stats.Bytes)
	if emb != nil {
		fmt.Fprintf(stdout, "%d documents queued for embeddings: the bot computes them when it runs (keyword search meanwhile)\n", n)
	}
	return exitOK
}

// recallReport is `bot doctor`'s recall line: the index's size and how far
// it lags the transcripts (changes queued, and the age of the oldest).
func recallReport(ctx context.Context, cfg *config.Config, st bot.Store, now time.Time, w io.Writer) error {
	if !cfg.Memory.Enabled {
		return nil
	}
	idx, closeIdx, err := bot.OpenRecallIndex(st)
	if err != nil {
		return err
	}
	defer closeIdx() //nolint:errcheck // read only
	built, err := idx.Built(ctx)
	if err != nil {
		return err
	}
	if !built {
		fmt.Fprintln(w, "⚠ recall index not built yet: the bot builds it when it starts (or run bot reindex)")
		return nil
	}
	stats, err := idx.Stats(ctx)
	if err != nil {
		return err
	}
	const most = 100_000
	queued, err := st.Pending(ctx, most)
	if err != nil {
		return err
	}
	lag := "none"
	if len(queued) > 0 {
		n := fmt.Sprint(len(queued))
		if len(queued) == most {
			n = "at least " + n
		}
		lag = n + " change(s) queued"
		if es, err := st.Range(ctx, queued[0].Key, queued[0].Seq, 1); err == nil && len(es) == 1 {
			lag += fmt.Sprintf(", the oldest from %s ago", now.Sub(es[0].At).Round(time.Second))
		}
	}
	fmt.Fprintf(w, "✔ recall index: %d documents, %s; lag: %s\n", stats.Docs, humanBytes(stats.Bytes), lag)
	emb, err := bot.OpenRecallEmbeddings(cfg, st)
	if err != nil || emb == nil {
		return err
	}
	waiting, err := emb.Vectors.Pending(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "✔ recall embeddings (%s): %d documents waiting for a vector\n", emb.Embedder.Model(), waiting)
	return nil
}
