package bot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
)

// TestNewOpensNothing: New(Options, Deps) only builds (the code rules: no
// I/O in New); Run opens the store. On the old code New created the bbolt
// file and dialled PostgreSQL (an unreachable database failed New).
func TestNewOpensNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		configure func(c *config.Config, dir string)
	}{
		{"bbolt", func(c *config.Config, dir string) { c.Store.Path = filepath.Join(dir, "bot.db") }},
		{"postgres unreachable", func(c *config.Config, dir string) {
			c.Store.Driver, c.Store.DSN = "postgres", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := config.Default()
			cfg.HTTP.Listen = ""
			tc.configure(cfg, dir)
			a, err := New(Options{Config: cfg}, Deps{Log: zerolog.Nop()})
			if err != nil {
				t.Fatalf("New = %v, want no error: it opens nothing", err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("New created %v in the store's directory", ents)
			}
			select {
			case <-a.Started():
				t.Fatal("Started is closed before Run")
			default:
			}
			if err := a.Close(); err != nil {
				t.Fatalf("Close of an App never run = %v", err)
			}
		})
	}
}

// TestRunOpensTheStore: Run opens the store, closes Started once every
// component is built, and releases the store when it returns; a store it
// cannot open is Run's error.
func TestRunOpensTheStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.HTTP.Listen = ""
	cfg.Store.Path = filepath.Join(dir, "bot.db")
	// Discord answers nowhere: the gateway retries until Run stops.
	cfg.Discord.Token, cfg.Discord.APIURL = "test-token-value", "http://127.0.0.1:1"
	a, err := New(Options{Config: cfg}, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Started():
	case err := <-done:
		t.Fatalf("Run stopped before it started: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run did not start in time")
	}
	if a.store == nil || a.sessions == nil || a.Scheduler() == nil {
		t.Fatal("Started is closed before the components are built")
	}
	if _, err := os.Stat(cfg.Store.Path); err != nil {
		t.Fatalf("Run did not open the store: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	// Released: a second App opens the same file at once.
	b, err := New(Options{Config: cfg}, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer bcancel()
	bdone := make(chan error, 1)
	go func() { bdone <- b.Run(bctx) }()
	select {
	case <-b.Started():
	case err := <-bdone:
		t.Fatalf("the second Run could not open the released store: %v", err)
	}
	if bctx.Err() != nil {
		t.Fatal("the second Run did not start in time")
	}
	bcancel()
	if err := <-bdone; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
