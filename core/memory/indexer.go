package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/transcript"
)

// Entries is what the Indexer reads of the transcript store.
type Entries interface {
	Range(ctx context.Context, key string, from uint64, limit int) ([]transcript.Entry, error)
	Sessions(ctx context.Context) ([]string, error)
}

// IndexerOptions tune the Indexer.
type IndexerOptions struct {
	// Batch is how many changes one step applies (0: 512).
	Batch int
	// Poll is how long Run waits when the queue is empty (0: 200ms).
	Poll time.Duration
	// EmbedBatch is how many texts one embeddings request carries (0: 64).
	EmbedBatch int
}

// IndexerDeps are what the Indexer works with. A nil Index makes an
// Indexer that only drains the Feed (memory is off: nothing derived is kept).
type IndexerDeps struct {
	Feed    Feed
	Entries Entries
	Index   Index
	// Vectors and Embedder (both or neither) add embeddings: each indexed
	// document is queued for a vector, computed by Run's second loop,
	// never on the reply's path; a failing endpoint is logged, recorded
	// in Health and retried, and keyword indexing goes on.
	Vectors  Vectors
	Embedder Embedder
	Health   *Health // nil: not recorded
	// Lag, if set, sees each applied change of an entry still in the
	// store: the time from the entry's write (its At) to now, after the
	// index has it (the load harness's index lag).
	Lag func(time.Duration)
	Log zerolog.Logger
}

// Indexer keeps an Index in step with the transcripts, off the reply's
// hot path: it applies the Feed's changes in batches and marks them done
// only after the Index has them.
type Indexer struct {
	opt IndexerOptions
	d   IndexerDeps
}

// NewIndexer returns an indexer; it does no I/O.
func NewIndexer(o IndexerOptions, d IndexerDeps) *Indexer {
	if o.Batch <= 0 {
		o.Batch = 512
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.EmbedBatch <= 0 {
		o.EmbedBatch = 64
	}
	return &Indexer{opt: o, d: d}
}

// Run builds the index if it was never built (or was reset), then applies
// changes until ctx ends. A failed step is logged and retried at the next
// poll: the changes stay queued.
func (x *Indexer) Run(ctx context.Context) error {
	if x.d.Index != nil {
		built, err := x.d.Index.Built(ctx)
		if err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
		if built && x.embeds() {
			// Vectors of another model (or none yet) are rebuilt.
			m, err := x.d.Vectors.Model(ctx)
			if err != nil {
				return fmt.Errorf("memory index: %w", err)
			}
			if m != x.d.Embedder.Model() {
				x.d.Log.Info().Str("was", m).Str("model", x.d.Embedder.Model()).Msg("memory index: the embedding model changed; rebuilding")
				built = false
			}
		}
		if !built {
			if _, err := x.Rebuild(ctx); err != nil {
				return err
			}
		}
	}
	if x.embeds() {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			x.embedLoop(ctx)
		}()
	}
	t := time.NewTicker(x.opt.Poll)
	defer t.Stop()
	for {
		n, err := x.Step(ctx)
		if err != nil && ctx.Err() == nil {
			x.d.Log.Warn().Err(err).Msg("memory index: applying transcript changes failed; retrying")
		}
		if err == nil && n == x.opt.Batch {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Step applies one batch of queued changes and reports how many it took.
func (x *Indexer) Step(ctx context.Context) (int, error) {
	cs, err := x.d.Feed.Pending(ctx, x.opt.Batch)
	if err != nil || len(cs) == 0 {
		return 0, err
	}
	var written []time.Time // the changed entries' times, for Lag
	if x.d.Index != nil {
		bySession := map[string][]uint64{}
		for _, c := range cs {
			bySession[c.Key] = append(bySession[c.Key], c.Seq)
		}
		var ups []Update
		for _, key := range slices.Sorted(maps.Keys(bySession)) {
			u, at, err := x.derive(ctx, key, bySession[key])
			if err != nil {
				return 0, err
			}
			ups = append(ups, u...)
			written = append(written, at...)
		}

		if len(ups) > 0 {
			if err := x.d.Index.Apply(ctx, ups); err != nil {
				return 0, fmt.Errorf("memory index: apply %d updates: %w", len(ups), err)
			}
			if x.embeds() {
				if err := x.d.Vectors.Want(ctx, ups); err != nil {
					return 0, fmt.Errorf("memory index: queue %d updates for embedding: %w", len(ups), err)
				}
			}
		}
	}
	pos := make([]uint64, len(cs))
	for i, c := range cs {
		pos[i] = c.Pos
	}
	if err := x.d.Feed.Done(ctx, pos); err != nil {
		return 0, fmt.Errorf("memory index: mark %d changes done: %w", len(pos), err)
	}
	if x.d.Lag != nil {
		now := time.Now()
		for _, at := range written {
			x.d.Lag(now.Sub(at))
		}
	}
	return len(cs), nil
}

// derive returns the updates that make the documents of the entries that
// changes at seqs touch match the store now.
func (x *Indexer) derive(ctx context.Context, key string, seqs []uint64) ([]Update, []time.Time, error) {
	if !Indexed(key) {
		return nil, nil, nil
	}
	from := slices.Min(seqs)
	window, err := x.d.Entries.Range(ctx, key, from, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("memory index: read %s from %d: %w", key, from, err)
	}
	var written []time.Time
	if x.d.Lag != nil {
		for _, e := range window {
			if slices.Contains(seqs, e.Seq) {
				written = append(written, e.At)
			}
		}
	}
	// The entries the changes are about: a change record's target, which
	// may come before the window.
	targets := map[uint64]bool{}
	for _, e := range window {
		if !slices.Contains(seqs, e.Seq) {
			continue
		}
		if e.IsChange() {
			targets[e.Target] = true
		} else {
			targets[e.Seq] = true
		}
	}
	if len(targets) == 0 {
		return nil, written, nil
	}
	if first := slices.Min(slices.Collect(maps.Keys(targets))); first < from {
		if window, err = x.d.Entries.Range(ctx, key, first, 0); err != nil {
			return nil, nil, fmt.Errorf("memory index: read %s from %d: %w", key, first, err)
		}
	}
	return fold(key, window, targets), written, nil
}

// fold returns, for each entry of window in targets (all when targets is
// nil), its document as the chat displays it now (the latest edit record's
// text), or its removal when the chat no longer displays it. A subagent's
// or job run's entry that was never displayed (a user or assistant entry
// without a message id) is its owner's alone: its document's key carries
// OwnedSuffix.
func fold(key string, window []transcript.Entry, targets map[uint64]bool) []Update {
	own := owned(key)
	want := func(seq uint64) bool { return targets == nil || targets[seq] }
	edited := map[uint64]string{}
	deleted := map[uint64]bool{}
	for _, e := range window {
		switch {
		case !e.IsChange() || !want(e.Target):
		case e.Source == transcript.SourceDeletion:
			deleted[e.Target] = true
		case e.Deleted:
			// an erased edit record: its target is erased too
		default:
			edited[e.Target] = e.Text // later records win
		}
	}
	var ups []Update
	for _, e := range window {
		if e.IsChange() || !want(e.Seq) {
			continue
		}
		text, ok := edited[e.Seq]
		if !ok {
			text = e.Text
		}
		ownOnly := own && len(e.MessageIDs) == 0 && (e.Role == transcript.RoleUser || e.Role == transcript.RoleAssistant)
		if e.Deleted || deleted[e.Seq] || text == "" || (len(e.MessageIDs) == 0 && !ownOnly) {
			if targets != nil { // a full build starts empty: nothing to remove
				ups = append(ups, Update{Delete: true, Doc: Doc{Key: key, Seq: e.Seq}})
				if own {
					ups = append(ups, Update{Delete: true, Doc: Doc{Key: key + OwnedSuffix, Seq: e.Seq}})
				}
			}
			continue
		}
		if ownOnly {
			ups = append(ups, Update{Doc: Doc{Key: key + OwnedSuffix, Seq: e.Seq, Role: e.Role, Author: e.Author, Text: text, At: e.At}})
			continue
		}
		ups = append(ups, Update{Doc: Doc{Key: key, Seq: e.Seq, Role: e.Role, Author: e.Author, Text: text, At: e.At, MessageID: e.MessageIDs[0]}})
	}
	return ups
}

// Rebuild empties the index and builds it again from every transcript
// (`bot reindex`, or a first start with memory on), then marks it built.
// Changes queued meanwhile are applied by later steps. It returns how many
// documents it wrote.
func (x *Indexer) Rebuild(ctx context.Context) (int, error) {
	if x.d.Index == nil {
		return 0, nil
	}
	if err := x.d.Index.Reset(ctx); err != nil {
		return 0, fmt.Errorf("memory index: reset: %w", err)
	}
	if x.embeds() {
		if err := x.d.Vectors.Reset(ctx, x.d.Embedder.Model()); err != nil {
			return 0, fmt.Errorf("memory index: reset: %w", err)
		}
	}
	keys, err := x.d.Entries.Sessions(ctx)
	if err != nil {
		return 0, fmt.Errorf("memory index: list sessions: %w", err)
	}
	n := 0
	var ups []Update
	flush := func() error {
		if len(ups) == 0 {
			return nil
		}
		if err := x.d.Index.Apply(ctx, ups); err != nil {
			return fmt.Errorf("memory index: rebuild: %w", err)
		}
		if x.embeds() {
			if err := x.d.Vectors.Want(ctx, ups); err != nil {
				return fmt.Errorf("memory index: rebuild: %w", err)
			}
		}
		n += len(ups)
		ups = ups[:0]
		return nil
	}
	for _, key := range keys {
		if !Indexed(key) {
			continue
		}
		es, err := x.d.Entries.Range(ctx, key, 1, 0)
		if err != nil {
			return n, fmt.Errorf("memory index: read %s: %w", key, err)
		}
		ups = append(ups, fold(key, es, nil)...)
		if len(ups) >= 4096 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	if err := x.d.Index.SetBuilt(ctx); err != nil {
		return n, fmt.Errorf("memory index: mark built: %w", err)
	}
	return n, nil
}

// embeds reports whether the index keeps embeddings.
func (x *Indexer) embeds() bool {
	return x.d.Index != nil && x.d.Vectors != nil && x.d.Embedder != nil
}

// EmbedStep embeds one batch of queued documents and reports how many.
func (x *Indexer) EmbedStep(ctx context.Context) (int, error) {
	if !x.embeds() {
		return 0, nil
	}
	return embedStep(ctx, x.d.Vectors, x.d.Embedder, x.opt.EmbedBatch)
}

// embedLoop embeds queued documents until ctx ends. A failure (the
// endpoint down, a bad answer) is logged once per change of state and
// retried after a back-off doubling from Poll to a minute; the documents
// stay queued and keyword search is unaffected.
func (x *Indexer) embedLoop(ctx context.Context) {
	wait := x.opt.Poll
	for {
		n, err := x.EmbedStep(ctx)
		if ctx.Err() != nil {
			return
		}
		if x.d.Health != nil && x.d.Health.set(err, time.Now()) {
			if err != nil {
				x.d.Log.Warn().Err(err).Str("model", x.d.Embedder.Model()).Msg("memory: the embeddings endpoint fails; recall ranks by keywords alone until it answers")
			} else {
				x.d.Log.Info().Str("model", x.d.Embedder.Model()).Msg("memory: the embeddings endpoint answers again")
			}
		}
		switch {
		case err != nil:
			wait = min(2*wait, time.Minute)
		case n == x.opt.EmbedBatch:
			wait = x.opt.Poll
			continue
		default:
			wait = x.opt.Poll
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
