// Package agentbot holds what the whole module shares at its root: the
// example configuration, which `bot setup` writes out as config.yaml.
package agentbot

import _ "embed"

// ConfigExample is config.example.yaml as shipped.
//
//go:embed config.example.yaml
var ConfigExample []byte
