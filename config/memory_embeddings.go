package config

import "strings"

// EmbeddingsConfig is memory.embeddings: hybrid recall. Model names a
// models entry of provider openai whose endpoint serves OpenAI-compatible
// embeddings (POST {baseURL}/embeddings: OpenAI, Ollama, vLLM, LM Studio);
// its model is the embedding model's name there (e.g. nomic-embed-text).
// "" (the default) keeps recall keyword-only.
type EmbeddingsConfig struct {
	Model string `yaml:"model"`
}

// EmbeddingModel returns the models entry memory.embeddings names, when
// memory is on and embeddings are configured.
func (c *Config) EmbeddingModel() (ModelConfig, bool) {
	if !c.Memory.Enabled || c.Memory.Embeddings.Model == "" {
		return ModelConfig{}, false
	}
	m, ok := c.Models[c.Memory.Embeddings.Model]
	return m, ok
}

func (c *Config) validateEmbeddings() *Error {
	name := c.Memory.Embeddings.Model
	if name == "" {
		return nil
	}
	const p = "memory.embeddings.model"
	m, ok := c.Models[name]
	switch {
	case !ok:
		return c.src.errAt(p, "%s is not defined under models; add an entry with provider openai and an embedding model "+
			"(e.g. models: {embed: {provider: openai, baseURL: \"http://127.0.0.1:11434/v1\", model: nomic-embed-text}}); defined models: %s",
			show(name), strings.Join(sortedKeys(c.Models), ", "))
	case m.Provider != ProviderOpenAI:
		return c.src.errAt(p, "%s has provider %s; embeddings need an OpenAI-compatible endpoint (provider openai: OpenAI, Ollama, vLLM, LM Studio)",
			show(name), show(m.Provider))
	case c.Store.Driver == "postgres":
		return c.src.errAt(p, "embeddings are kept beside the bbolt store only for now; with store.driver postgres recall ranks by keywords (remove this key)")
	}
	return nil
}
