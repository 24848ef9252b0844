//go:build tools

// Package agentbot pins the modules the project builds on before every one of them is imported.
package agentbot

import (
	_ "github.com/anthropics/anthropic-sdk-go/v2"
	_ "github.com/bwmarrin/discordgo"
	_ "github.com/gorilla/websocket"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/robfig/cron/v3"
	_ "github.com/rs/zerolog"
	_ "go.etcd.io/bbolt"
	_ "golang.org/x/sync/errgroup"
	_ "gopkg.in/yaml.v3"
)
