package bot

import (
	"fmt"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/agentroute"
)

// agentRoutes builds the table of agents[].channels over the platforms'
// places (the platform table: Discord's gateway cache; Matrix rooms need
// none).
func agentRoutes(cfg *config.Config, places agentroute.Locator) (*agentroute.Table, error) {
	claims := make([]agentroute.Claim, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		claims = append(claims, agentroute.Claim{Agent: a.ID, IDs: a.Channels})
	}
	t, err := agentroute.New(cfg.Agents[0].ID, claims, places)
	if err != nil {
		return nil, fmt.Errorf("agents[].channels: %w (%w)", err, config.ErrInvalid)
	}
	return t, nil
}

// routeIDs are agents[].channels as claimed id -> agent (for the live check).
func routeIDs(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, a := range cfg.Agents {
		for _, id := range a.Channels {
			out[id] = a.ID
		}
	}
	return out
}
