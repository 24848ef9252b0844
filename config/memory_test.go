package config

import (
	"strings"
	"testing"
)

func TestMemoryConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml           string
		enabled, notes bool
		err            string
	}{
		{yaml: "", enabled: false},
		{yaml: "memory: {enabled: true}\n", enabled: true, notes: true},
		{yaml: "memory:\n  enabled: false\n", enabled: false},
		{yaml: "memory: {enabeld: true}\n", err: "memory.enabeld"},
		{yaml: "memory: {enabled: yes please}\n", err: "memory.enabled"},
		{yaml: "memory: {enabled: true, notes: true}\n", enabled: true, notes: true},
		{yaml: "memory: {enabled: true, notes: false}\n", enabled: true, notes: false},
		{yaml: "memory: {enabled: false, notes: true}\n", enabled: false, notes: false},
		{yaml: "memory: {enabled: true, notes: maybe}\n", err: "memory.notes"},
	} {
		cfg, err := LoadBytes("t.yaml", []byte(tc.yaml), envOf(nil))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want one naming %s", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil || cfg.Memory.Enabled != tc.enabled || cfg.Memory.NotesOn() != tc.notes {
			t.Errorf("%q: enabled, notes = %v, %v, %v; want %v, %v", tc.yaml, cfg != nil && cfg.Memory.Enabled, cfg != nil && cfg.Memory.NotesOn(), err, tc.enabled, tc.notes)
		}
	}
}

func TestEmbeddingsConfig(t *testing.T) {
	t.Parallel()
	const models = "models:\n  default: {provider: echo}\n  embed: {provider: openai, baseURL: \"http://127.0.0.1:11434/v1\", model: nomic-embed-text}\n"
	for _, tc := range []struct {
		yaml, err, model string
	}{
		{yaml: models + "memory: {enabled: true}\n"},
		{yaml: models + "memory: {enabled: true, embeddings: {model: embed}}\n", model: "nomic-embed-text"},
		{yaml: models + "memory: {enabled: false, embeddings: {model: embed}}\n"},
		{yaml: models + "memory: {enabled: true, embeddings: {model: nope}}\n", err: "memory.embeddings.model"},
		{yaml: models + "memory: {enabled: true, embeddings: {model: default}}\n", err: "OpenAI-compatible"},
		{yaml: models + "memory: {enabled: true, embeddings: {modle: embed}}\n", err: "memory.embeddings.modle"},
	} {
		cfg, err := LoadBytes("t.yaml", []byte(tc.yaml), envOf(nil))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want one naming %s", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
			continue
		}
		m, ok := cfg.EmbeddingModel()
		if ok != (tc.model != "") || m.Model != tc.model {
			t.Errorf("%q: embedding model = %+v, %v; want %q", tc.yaml, m, ok, tc.model)
		}
	}
}
