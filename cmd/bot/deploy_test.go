package main

import (
	"os"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/console"
)

// TestDeployConfigLoads: the container image's config loads and passes bot
// run's validation on bbolt and (as compose.yaml sets it) on PostgreSQL,
// and it refuses to start without BOT_HTTP_TOKEN (it listens beyond
// loopback).
func TestDeployConfigLoads(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../deploy/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		driver string
	}{
		{"bolt", map[string]string{"DISCORD_TOKEN": "t", "BOT_HTTP_TOKEN": "h"}, "bolt"},
		{"postgres", map[string]string{"DISCORD_TOKEN": "t", "BOT_HTTP_TOKEN": "h", "STORE_DRIVER": "postgres", "DATABASE_URL": "postgres://a:b@db/agentbot"}, "postgres"},
	} {
		cfg, err := config.LoadBytes("deploy/config.yaml", data, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := cfg.ValidateForRun(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg.Store.Driver != tc.driver || cfg.Store.Path != "/data/bot.db" || cfg.HTTP.Token != "h" {
			t.Fatalf("%s: %+v %+v", tc.name, cfg.Store, cfg.HTTP)
		}
	}
	cfg, err := config.LoadBytes("deploy/config.yaml", data, func(k string) (string, bool) { return map[string]string{"DISCORD_TOKEN": "t"}[k], k == "DISCORD_TOKEN" })
	if err == nil {
		err = console.CheckAccess(cfg.HTTP.Listen, cfg.HTTP.Token) // what newApp checks first
	}
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("no BOT_HTTP_TOKEN: err = %v, want a refusal naming the token", err)
	}
}
