package bot

import (
	"fmt"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/metrics"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/fallback"
	"github.com/agentbot/agentbot/model/providers"
)

// sdkRetries is how often an official SDK retries one call itself: a
// model with fallbacks hands a failure on at once (the fallback is its
// retry), a model without retries once (DECISIONS 222).
func sdkRetries(mc config.ModelConfig) int {
	if len(mc.Fallbacks) > 0 {
		return 0
	}
	return 1
}

// buildModels builds one provider per models entry and puts them into
// fallback chains with a breaker each.
func buildModels(cfg *config.Config, hc *http.Client, clk clock.Clock, m *metrics.Metrics, log zerolog.Logger) (*fallback.Set, error) {
	models := make(map[string]fallback.Model, len(cfg.Models))
	for name, mc := range cfg.Models {
		p, err := providers.New(model.Config{Provider: mc.Provider, BaseURL: mc.BaseURL, APIKey: mc.APIKey, Model: mc.Model,
			Timeout: mc.Timeout, Retries: sdkRetries(mc)}, hc)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
		models[name] = fallback.Model{Provider: p, Fallbacks: mc.Fallbacks}
	}
	var obs fallback.Observer
	if m != nil {
		obs = m
	}
	return fallback.New(fallback.Options{Models: models, Breaker: fallback.DefaultBreaker},
		fallback.Deps{Clock: clk, Log: log, Observer: obs})
}
