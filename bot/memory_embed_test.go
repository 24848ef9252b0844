package bot

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/memory/embed/embedtest"
)

// TestDoctorEmbeddings: bot doctor says whether the embeddings endpoint
// answers, and counts a failure as a problem.
func TestDoctorEmbeddings(t *testing.T) {
	srv := embedtest.New(t)
	cfg := &config.Config{
		Models: map[string]config.ModelConfig{"embed": {Provider: config.ProviderOpenAI, BaseURL: srv.URL, Model: "fake-embed", Timeout: 5 * time.Second}},
		Memory: config.MemoryConfig{Enabled: true, Embeddings: config.EmbeddingsConfig{Model: "embed"}},
	}
	var out bytes.Buffer
	if n := DoctorEmbeddings(t.Context(), cfg, &out); n != 0 || !strings.Contains(out.String(), "✔ embeddings: fake-embed (models.embed) answers, 32 dimensions") {
		t.Fatalf("up: %d problems, %q", n, out.String())
	}
	srv.Down.Store(true)
	out.Reset()
	if n := DoctorEmbeddings(t.Context(), cfg, &out); n != 1 || !strings.Contains(out.String(), "does not answer") || !strings.Contains(out.String(), "keywords alone") {
		t.Fatalf("down: %d problems, %q", n, out.String())
	}
	cfg.Memory.Embeddings.Model = ""
	out.Reset()
	if n := DoctorEmbeddings(t.Context(), cfg, &out); n != 0 || out.Len() != 0 {
		t.Fatalf("off: %d problems, %q", n, out.String())
	}
}
