package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/store/postgres"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

// TestPostgresRestartMidBurst (issue 27 item 8): a turn sends 60
// send_message deliveries; after the emulator has shown 20 of them the
// PostgreSQL server is shut down (fast shutdown: every session ends with
// 57P01) and started again. Every store call waits out the restart
// (bounded backoff in the driver), so all 60 messages are displayed once
// and recorded in their transcript, and the turn's final reply (every
// send reported sent) is delivered. On the old code every store call
// failed at once: most sends were reported failed and the final reply was
// lost.
func TestPostgresRestartMidBurst(t *testing.T) {
	srv := pgtest.NewServer(t)
	dsn := srv.DSN(t)
	ctx := context.Background()
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: zerolog.Nop(), Configure: func(c *config.Config) {
		c.Store.Driver, c.Store.DSN = "postgres", dsn
		for name, m := range c.Models {
			m.MaxToolSteps = 100
			c.Models[name] = m
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if err := h.start(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := h.emu.AddTextChannel(h.guild.ID, "burst")
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	var b strings.Builder
	fmt.Fprintf(&b, "<@%s> post the burst", h.emu.BotUserID())
	for i := range n {
		fmt.Fprintf(&b, "\n!tool send_message {\"to\":\"channel:%s\",\"text\":\"burst %02d\"}", other.ID, i)
	}
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, b.String()); err != nil {
		t.Fatal(err)
	}
	if err := h.waitFor(ctx, "the 20th send", func() bool { return len(h.emu.Messages(other.ID)) >= 20 }); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	results := func() int { // tool results reported in #general's reply (split over messages)
		c := 0
		for _, m := range h.emu.Messages(h.general.ID) {
			c += strings.Count(m.Content, "- send_message: ")
		}
		return c
	}
	if err := h.emu.Wait(wctx, func() bool { return len(h.emu.Messages(other.ID)) >= n && results() >= n }); err != nil {
		t.Fatalf("after the restart: %d of %d sends shown, #general shows %d messages: %v",
			len(h.emu.Messages(other.ID)), n, len(h.emu.Messages(h.general.ID)), err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	shown := h.emu.Messages(other.ID)
	seen := map[string]int{}
	for _, m := range shown {
		seen[m.Content]++
	}
	for i := range n {
		if c := seen[fmt.Sprintf("burst %02d", i)]; c != 1 {
			t.Errorf("burst %02d displayed %d times", i, c)
		}
	}
	var reply string // a long reply is split into several messages
	for _, m := range h.emu.Messages(h.general.ID)[1:] {
		reply += m.Content
	}
	if got := strings.Count(reply, "send_message: sent"); got != n {
		t.Errorf("final reply reports %d of %d sends sent: %.300q", got, n, reply)
	}
	st, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	problems, err := rule1.Check(ctx, rule1.Emulator(h.emu), st, []string{h.general.ID, other.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
