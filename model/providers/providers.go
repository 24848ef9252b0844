// Package providers builds a model.Provider from a model.Config. It lives
// apart from package model because it imports every provider package, and
// those import model.
package providers

import (
	"fmt"
	"net/http"

	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/anthropic"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/model/openai"
)

// Names lists the accepted Config.Provider values ("" means echo).
var Names = []string{"echo", "openai", "anthropic"}

// New returns the provider cfg names. httpClient may be nil (each provider
// then uses its own default client); tests pass a client for loopback fakes.
// Errors name the offending field and never contain the API key.
func New(cfg model.Config, httpClient *http.Client) (model.Provider, error) {
	switch cfg.Provider {
	case "", "echo":
		return echo.New(), nil
	case "openai":
		return openai.New(cfg, httpClient)
	case "anthropic":
		return anthropic.New(cfg, httpClient)
	}
	return nil, fmt.Errorf("model provider %q is unknown (want echo, openai or anthropic)", cfg.Provider)
}
