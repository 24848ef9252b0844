package bot

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/memory/embed"
	"github.com/agentbot/agentbot/store/bolt"
)

// RecallEmbeddings is hybrid recall's side: the vectors in the bbolt store
// and the embeddings client of memory.embeddings.model.
type RecallEmbeddings struct {
	Vectors  memory.Vectors
	Embedder memory.Embedder
}

// OpenRecallEmbeddings returns st's recall vectors and the embeddings
// client, or nil when memory.embeddings is off. It does no I/O.
func OpenRecallEmbeddings(cfg *config.Config, st Store) (*RecallEmbeddings, error) {
	m, ok := cfg.EmbeddingModel()
	if !ok {
		return nil, nil
	}
	s, ok := st.(*bolt.Store)
	if !ok {
		return nil, fmt.Errorf("memory.embeddings: the store %T keeps no vectors (bbolt only)", st)
	}
	cl, err := embed.New(embed.Config{BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Model, Timeout: m.Timeout}, nil)
	if err != nil {
		return nil, fmt.Errorf("memory.embeddings: %w", err)
	}
	return &RecallEmbeddings{Vectors: s.RecallVectors(), Embedder: cl}, nil
}

// removeRecallVectors drops the vectors of a bbolt store (memory or
// embeddings off: nothing derived is kept).
func removeRecallVectors(ctx context.Context, st Store) error {
	if s, ok := st.(*bolt.Store); ok {
		return s.DropRecallVectors(ctx)
	}
	return nil
}

// DoctorEmbeddings is `bot doctor`'s embeddings line: whether the endpoint
// answers now (one short text embedded). It returns the problems found.
func DoctorEmbeddings(ctx context.Context, cfg *config.Config, w io.Writer) int {
	m, ok := cfg.EmbeddingModel()
	if !ok {
		return 0
	}
	cl, err := embed.New(embed.Config{BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Model, Timeout: 10 * time.Second}, nil)
	if err == nil {
		var vs [][]float32
		if vs, err = cl.Embed(ctx, []string{"doctor"}); err == nil {
			fmt.Fprintf(w, "✔ embeddings: %s (models.%s) answers, %d dimensions\n", m.Model, cfg.Memory.Embeddings.Model, len(vs[0]))
			return 0
		}
	}
	fmt.Fprintf(w, "✖ embeddings: %s (models.%s) does not answer: %v; recall ranks by keywords alone until it does\n",
		m.Model, cfg.Memory.Embeddings.Model, err)
	return 1
}
