// Package embed is recall's embeddings client (memory.Embedder): an
// OpenAI-compatible embeddings endpoint (POST {baseURL}/embeddings, as
// OpenAI, Ollama, vLLM and LM Studio serve it), through the OpenAI SDK the
// chat models use.
//
// Invariant: an error never carries the API key (the SDK's errors name the
// method, URL and status).
package embed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentbot/agentbot/core/memory"
)

var _ memory.Embedder = (*Client)(nil)

// Config is the models entry memory.embeddings names.
type Config struct {
	BaseURL, APIKey, Model string
	// Timeout bounds one request (0: 30s).
	Timeout time.Duration
}

// Client embeds texts.
type Client struct {
	svc     oai.EmbeddingService
	model   string
	timeout time.Duration
}

// New returns a client; it does no I/O. httpClient may be nil.
func New(cfg Config, httpClient *http.Client) (*Client, error) {
	if cfg.Model == "" {
		return nil, errors.New("embeddings: the model is required")
	}
	base := cfg.BaseURL
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	// NewEmbeddingService, unlike NewClient, reads no OPENAI_* variables.
	// No SDK retries: the indexer retries with its own back-off, and a
	// query falls back to keywords at once.
	svc := oai.NewEmbeddingService(option.WithBaseURL(base), option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(httpClient), option.WithMaxRetries(0))
	return &Client{svc: svc, model: cfg.Model, timeout: cfg.Timeout}, nil
}

// Model names the embedding model.
func (c *Client) Model() string { return c.model }

// Embed returns one vector per text, in order.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res, err := c.svc.New(ctx, oai.EmbeddingNewParams{
		Model:          oai.EmbeddingModel(c.model),
		Input:          oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: oai.EmbeddingNewParamsEncodingFormatFloat,
	})
	if err != nil {
		return nil, fmt.Errorf("embeddings %s: %w", c.model, err)
	}
	out := make([][]float32, len(texts))
	for _, d := range res.Data {
		if d.Index < 0 || int(d.Index) >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings %s: the answer's index %d does not match the %d texts sent", c.model, d.Index, len(texts))
		}
		v := make([]float32, len(d.Embedding))
		for i, x := range d.Embedding {
			v[i] = float32(x)
		}
		out[d.Index] = v
	}
	for i, v := range out {
		if len(v) == 0 {
			return nil, fmt.Errorf("embeddings %s: no vector for text %d of %d", c.model, i+1, len(texts))
		}
	}
	return out, nil
}
