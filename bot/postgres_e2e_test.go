package bot

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/store/postgres"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

// TestMain stops the private PostgreSQL server that tests start on demand.
func TestMain(m *testing.M) {
	// The test binary is the bot an in-process harness runs: it is the
	// sandbox relay of its sandboxed ACP agents too.
	if len(os.Args) > 1 && os.Args[1] == RelayCommand {
		os.Exit(acp.RelayMain(os.Args[2:]))
	}
	os.Exit(pgtest.Main(m))
}

// TestBotRunsOnPostgres: with store.driver postgres the real wiring answers
// a mention, spawns a bound subagent, survives a restart with its binding,
// and the transcripts in PostgreSQL equal what the channels display.
func TestBotRunsOnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: zerolog.Nop(), Configure: func(c *config.Config) {
		c.Store.Driver, c.Store.DSN = "postgres", dsn
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if err := h.start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> hello from postgres"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "spawn", discordtest.CommandOption{Name: "task", Value: "count"},
		discordtest.CommandOption{Name: "thread", Value: true}); err != nil {
		t.Fatal(err)
	}
	var thread string
	if err := h.waitFor(ctx, "the reply and the subagent's thread", func() bool {
		ths := h.emu.Threads(h.general.ID)
		if len(ths) == 1 {
			thread = ths[0].ID
		}
		return thread != "" && len(h.emu.Messages(thread)) >= 2 && len(h.emu.Messages(h.general.ID)) >= 3
	}); err != nil {
		t.Fatal(err)
	}
	// Restart: the binding survives in PostgreSQL and still routes the thread.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserSay(thread, h.alice.ID, "and now?"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.WaitMessages(ctx, thread, 4); err != nil {
		t.Fatal(err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(ctx, dsn, postgres.Options{ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	problems, err := rule1.Check(ctx, rule1.Emulator(h.emu), st, []string{h.general.ID, thread}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if msgs := h.emu.Messages(thread); msgs[3].WebhookID == "" {
		t.Errorf("the reply in the bound thread after the restart was not posted by the persona: %+v", msgs[3])
	}
}
