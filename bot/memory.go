package bot

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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
	on     atomic.Bool
	close  func() error
	remove func(context.Context) error // memory off: drop the index
	// removeVectors drops the vectors of embeddings turned off.
	removeVectors func(context.Context) error
	indexer       *memory.Indexer
	recall        *memory.Recall
}

// OpenRecallIndex opens the store's recall index: a bleve directory beside
// the bbolt file, or the tables of the PostgreSQL database.
func OpenRecallIndex(st Store) (memory.Index, func() error, error) {
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

func newRecallSide(cfg *config.Config, st Store, auth *authz.Authority, d Deps, log zerolog.Logger) (*recallSide, error) {
	r := &recallSide{close: func() error { return nil }}
	r.on.Store(cfg.Memory.Enabled)
	if !cfg.Memory.Enabled {
		r.remove = func(ctx context.Context) error {
			switch s := st.(type) {
			case *bolt.Store:
				return errors.Join(bleveindex.Remove(bleveindex.Dir(s.Path())), removeRecallVectors(ctx, st))
			case *postgres.Store:
				return s.RecallIndex().Reset(ctx)
			}
			return nil
		}
		// No index: the indexer only drains the queue.
		r.indexer = memory.NewIndexer(memory.IndexerOptions{}, memory.IndexerDeps{Feed: st, Entries: st, Log: log})
		return r, nil
	}
	idx, closeIdx, err := OpenRecallIndex(st)
	if err != nil {
		return nil, fmt.Errorf("memory.enabled: %w", err)
	}
	r.close = closeIdx
	emb, err := OpenRecallEmbeddings(cfg, st)
	if err != nil {
		_ = closeIdx()
		return nil, err
	}
	rd := memory.RecallDeps{Index: idx, Entries: st, Viewer: auth, Owners: recallOwners{st}, Clock: d.Clock, Log: log}
	id := memory.IndexerDeps{Feed: st, Entries: st, Index: idx, Log: log, Lag: d.IndexLag}
	if emb != nil {
		h := &memory.Health{}
		rd.Vectors, rd.Embedder, rd.Health = emb.Vectors, emb.Embedder, h
		id.Vectors, id.Embedder, id.Health = emb.Vectors, emb.Embedder, h
	} else {
		r.removeVectors = func(ctx context.Context) error { return removeRecallVectors(ctx, st) }
	}
	r.recall = memory.NewRecall(memory.RecallOptions{}, rd)
	r.indexer = memory.NewIndexer(memory.IndexerOptions{}, id)
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
	if r.removeVectors != nil {
		if err := r.removeVectors(ctx); err != nil {
			return fmt.Errorf("memory.embeddings is off, but the vectors could not be removed: %w", err)
		}
	}
	return r.indexer.Run(ctx)
}

// SetMemory applies a reloaded memory.enabled (SIGHUP): off withdraws the
// recall tool, /memory search and the console search at once. It reports
// false when turning memory on needs a restart (it was off at start, so
// no index is open).
func (a *App) SetMemory(on bool) bool { return a.recall.setOn(on) }
