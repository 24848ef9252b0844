package discord

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
)

// idleSessions is a Sessions with no conversations: nothing owed, nothing
// running.
type idleSessions struct{}

func (idleSessions) HandleMessage(context.Context, session.Message) error { return nil }
func (idleSessions) OwnSessions(binding.ConversationRef) []string         { return nil }
func (idleSessions) Watermarks() map[string]string                        { return nil }
func (idleSessions) Running(string) (session.Run, bool)                   { return session.Run{}, false }
func (idleSessions) Stop(session.Run) bool                                { return false }
func (idleSessions) MessageDeleted(context.Context, string) bool          { return false }
func (idleSessions) MessageEdited(string) bool                            { return false }
func (idleSessions) Reanswer(context.Context, session.Message, string) (bool, error) {
	return false, nil
}

// No gateway session outlives Run (issue 27, soak seed 125): a discordgo
// reconnect loop started by a read or heartbeat failure that raced the
// final Close called Open again and identified a stopped process's session
// with the emulator, which then handed a new interaction to it ("the bot is
// restarting"). After Run returns, every session of the gateway refuses to
// connect, and reconnecting is off.
func TestNoSessionReconnectsAfterRun(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	c, a := wire(t, ClientOptions{Token: e.Token(), APIURL: e.URL()}, ClientDeps{Log: zerolog.Nop()},
		GatewayOptions{Reconnect: true, DrainTimeout: 5 * time.Second}, GatewayDeps{Sessions: idleSessions{}, Log: zerolog.New(zerolog.NewTestWriter(t))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Connected():
	case err := <-done:
		t.Fatalf("Run returned before READY: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no READY within 20s")
	}
	s := c.session()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s of its context ending")
	}
	identifies := e.GatewayStats().Identifies

	// What discordgo's reconnect loop does after a failure: Open again.
	if err := s.Open(); !errors.Is(err, errGatewayStopped) {
		t.Fatalf("Open after Run = %v, want %v", err, errGatewayStopped)
	}
	if n := e.GatewayStats().Identifies; n != identifies {
		t.Fatalf("identifies %d after Run returned, want %d: a stopped gateway's session connected again", n, identifies)
	}
	s.RLock()
	again := s.ShouldReconnectOnError
	s.RUnlock()
	if again {
		t.Error("the session still reconnects on errors after Run returned")
	}
}
