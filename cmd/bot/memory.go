package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/console"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/memory/bleveindex"
	"github.com/agentbot/agentbot/store/bolt"
	"github.com/agentbot/agentbot/store/postgres"
)

// recallSide is memory's recall: the index beside the store, the indexer
// that follows the store's change queue, and the recall tool. With memory
// off it keeps no index (an existing one is removed) and only drains the
// queue, so it does not grow.
type recallSide struct {
	on      atomic.Bool
	close   func() error
	remove  func(context.Context) error // memory off: drop the index
	indexer *memory.Indexer
	recall  *memory.Recall
}

// openRecallIndex opens the store's recall index: a bleve directory beside
// the bbolt file, or the tables of the PostgreSQL database.
func openRecallIndex(st botStore) (memory.Index, func() error, error) {
	switch s := st.(type) {
	case *bolt.Store:
		idx, err := bleveindex.Open(bleveindex.Dir(s.Path()))
		if err != nil {
			return nil, nil, err
		}
		return idx, idx.Close, nil
	case *postgres.Store:
		return s.RecallIndex(), func() error { return nil }, nil
	}
	return nil, nil, fmt.Errorf("the store %T keeps no recall index", st)
}

func newRecallSide(cfg *config.Config, st botStore, auth *authz.Authority, o appOptions, log zerolog.Logger) (*recallSide, error) {
	r := &recallSide{close: func() error { return nil }}
	r.on.Store(cfg.Memory.Enabled)
	var idx memory.Index // nil: memory is off
	if cfg.Memory.Enabled {
		var (
			closeIdx func() error
			err      error
		)
		if idx, closeIdx, err = openRecallIndex(st); err != nil {
			return nil, fmt.Errorf("memory.enabled: %w", err)
		}
		r.close = closeIdx
		r.recall = memory.NewRecall(memory.RecallOptions{}, memory.RecallDeps{Index: idx, Entries: st, Viewer: auth, Clock: o.Clock})
	} else {
		r.remove = func(ctx context.Context) error {
			switch s := st.(type) {
			case *bolt.Store:
				return bleveindex.Remove(bleveindex.Dir(s.Path()))
			case *postgres.Store:
				return s.RecallIndex().Reset(ctx)
			}
			return nil
		}
	}
	r.indexer = memory.NewIndexer(memory.IndexerOptions{}, memory.IndexerDeps{Feed: st, Entries: st, Index: idx, Log: log, Clock: o.Clock, Observe: o.IndexLag})
	return r, nil
}

// toolbox puts the recall tool in front of next (the MCP tools; nil: none)
// when memory is on at start; SIGHUP can turn it off (setOn).
func (r *recallSide) toolbox(next session.Toolbox) session.Toolbox {
	if r.recall == nil {
		return next
	}
	return memory.Tools{Recall: r.recall, On: r.on.Load, Next: next}
}

// commands is /memory search's recall (nil when memory is off at start).
func (r *recallSide) commands() command.Memory {
	if r.recall == nil {
		return nil
	}
	return recallCommands{r}
}

// console is the console's Memory page search (nil when memory is off at
// start), refusing while SIGHUP has turned memory off.
func (r *recallSide) console() console.Searcher {
	if r.recall == nil {
		return nil
	}
	return recallCommands{r}
}

func (c recallCommands) SearchAll(ctx context.Context, text string, limit int) ([]memory.Found, error) {
	if !c.r.on.Load() {
		return nil, command.ErrMemoryOff
	}
	return c.r.recall.SearchAll(ctx, text, limit)
}

// recallCommands is the recall of /memory search, refusing while SIGHUP
// has turned memory off.
type recallCommands struct{ r *recallSide }

func (c recallCommands) Search(ctx context.Context, userID, text string, limit int) ([]memory.Found, error) {
	if !c.r.on.Load() {
		return nil, command.ErrMemoryOff
	}
	return c.r.recall.Search(ctx, userID, text, limit)
}

func (c recallCommands) SearchIn(ctx context.Context, userID string, conv binding.ConversationRef, text string, limit int) ([]memory.Found, error) {
	if !c.r.on.Load() {
		return nil, command.ErrMemoryOff
	}
	return c.r.recall.SearchIn(ctx, userID, conv, text, limit)
}

// setOn applies a reloaded memory.enabled: off withdraws the tool from the
// next turn; on needs a restart when the bot started with it off (no index
// was opened).
func (r *recallSide) setOn(on bool) (applied bool) {
	if on && r.recall == nil {
		return false
	}
	r.on.Store(on)
	return true
}

// Run follows the store's change queue until ctx ends.
func (r *recallSide) Run(ctx context.Context) error {
	if r.remove != nil {
		if err := r.remove(ctx); err != nil {
			return fmt.Errorf("memory is off, but its index could not be removed: %w", err)
		}
	}
	return r.indexer.Run(ctx)
}

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
	st, err := openStore(ctx, cfg.Store, 200*time.Millisecond)
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			fmt.Fprintf(stderr, "bot: reindex: %v; stop the bot first\n", err)
			return exitUsage
		}
		fmt.Fprintln(stderr, "bot: reindex:", err)
		return exitProblems
	}
	defer st.Close()
	idx, closeIdx, err := openRecallIndex(st)
	if err != nil {
		fmt.Fprintln(stderr, "bot: reindex:", err)
		return exitProblems
	}
	defer closeIdx() //nolint:errcheck // read-only use after the rebuild
	start := time.Now()
	ix := memory.NewIndexer(memory.IndexerOptions{}, memory.IndexerDeps{Feed: st, Entries: st, Index: idx, Log: zerolog.Nop()})
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
	return exitOK
}

// recallReport is `bot doctor`'s recall line: the index's size and how far
// it lags the transcripts (changes queued, and the age of the oldest).
func recallReport(ctx context.Context, cfg *config.Config, st botStore, now time.Time, w io.Writer) error {
	if !cfg.Memory.Enabled {
		return nil
	}
	idx, closeIdx, err := openRecallIndex(st)
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
	return nil
}
