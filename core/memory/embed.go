package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Embedder turns texts into vectors (an OpenAI-compatible embeddings
// endpoint: memory/embed).
type Embedder interface {
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the embedding model (vectors of two models never mix).
	Model() string
}

// Vectors keeps one vector per indexed document, beside the keyword index,
// and finds the nearest among a view. Derived like the index: Want is
// called in the same step that applies updates to the index (before the
// changes are marked done), so a crash loses no document's vector, and a
// deleted document's vector (and queued text) is gone with it.
type Vectors interface {
	// Want records ups: a put queues its document for embedding (replacing
	// a vector of other text), a delete removes its vector and queue entry.
	Want(ctx context.Context, ups []Update) error
	// Todo returns up to limit documents queued for embedding.
	Todo(ctx context.Context, limit int) ([]Doc, error)
	// Put stores vecs[i] for docs[i], unless the document was changed or
	// deleted meanwhile (its queued text differs), and unqueues it.
	Put(ctx context.Context, docs []Doc, vecs [][]float32) error
	// Nearest returns up to limit documents of keys, most similar to vec
	// first (cosine similarity as Score).
	Nearest(ctx context.Context, keys []string, vec []float32, limit int) ([]Hit, error)
	// Model is the model whose vectors are kept ("" for none yet);
	// Reset empties the vectors and the queue and sets the model.
	Model(ctx context.Context) (string, error)
	Reset(ctx context.Context, model string) error
	// Pending counts the documents queued for embedding.
	Pending(ctx context.Context) (int, error)
}

// Health is the embeddings endpoint's last outcome, for logs and doctor:
// a failing endpoint degrades recall to keywords, never fails it.
type Health struct {
	mu   sync.Mutex
	err  error
	at   time.Time
	fail int
}

// set records an outcome and reports whether it changed from ok to
// failing or back (worth one log line).
func (h *Health) set(err error, now time.Time) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed = (err == nil) != (h.err == nil) || (h.at.IsZero() && err != nil)
	h.err, h.at = err, now
	if err != nil {
		h.fail++
	} else {
		h.fail = 0
	}
	return changed
}

// Last is when the endpoint was last tried and its error then (nil: it
// answered, or was never tried).
func (h *Health) Last() (at time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at, h.err
}

// embedStep embeds one batch of queued documents and reports how many.
func embedStep(ctx context.Context, v Vectors, e Embedder, batch int) (int, error) {
	docs, err := v.Todo(ctx, batch)
	if err != nil || len(docs) == 0 {
		return 0, err
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	vecs, err := e.Embed(ctx, texts)
	if err != nil {
		return 0, fmt.Errorf("embeddings: %w", err)
	}
	if len(vecs) != len(docs) {
		return 0, fmt.Errorf("embeddings: %d vectors for %d texts", len(vecs), len(docs))
	}
	if err := v.Put(ctx, docs, vecs); err != nil {
		return 0, fmt.Errorf("embeddings: store %d vectors: %w", len(vecs), err)
	}
	return len(docs), nil
}

// rrfK is reciprocal rank fusion's constant (Cormack et al.: 60).
const rrfK = 60

// fuse merges keyword hits and semantic hits by reciprocal rank fusion: a
// document scores the sum of 1/(60+rank) over the lists it is in (rank
// from 1), best first, newest first among equals. A document in both keeps
// the keyword hit (its text is the index's).
func fuse(keyword, semantic []Hit, limit int) []Hit {
	type acc struct {
		h     Hit
		score float64
	}
	by := map[string]*acc{}
	var order []*acc
	add := func(hs []Hit) {
		for i, h := range hs {
			a, ok := by[h.Doc.ID()]
			if !ok {
				a = &acc{h: h}
				by[h.Doc.ID()] = a
				order = append(order, a)
			}
			a.score += 1 / float64(rrfK+i+1)
		}
	}
	add(keyword)
	add(semantic)
	slices.SortStableFunc(order, func(a, b *acc) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return b.h.Doc.At.Compare(a.h.Doc.At)
	})
	out := make([]Hit, 0, min(limit, len(order)))
	for _, a := range order[:min(limit, len(order))] {
		a.h.Score = a.score
		out = append(out, a.h)
	}
	return out
}
