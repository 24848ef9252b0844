package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/store/bolt"
)

// Shared helpers of the end-to-end tests (real wiring against the emulator).

// startBot starts the real bot against a fresh emulator and store; p, if
// not nil, replaces every agent's model; configure adjusts the config.
func startBot(t *testing.T, p model.Provider, configure func(*config.Config)) *harness {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Configure: configure, Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.close()
		// Every test, finished with finishBot or not: no send or edit may
		// lack allowed_mentions (the emulator answered it 400 too).
		for _, v := range h.emu.Violations() {
			if v.Kind == "allowed_mentions" {
				t.Errorf("ping guard: %s", v)
			}
		}
	})
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return h
}

// finishBot stops the bot, reopens its store, requires Rule 1 to hold for
// channels and no OpenAPI violation, and returns the store (closed at the
// end of the test) for further checks.
func finishBot(t *testing.T, h *harness, channels ...string) *bolt.Store {
	t.Helper()
	return finishBotOn(t, h, func() rule1.Display { return rule1.Emulator(h.emu) }, channels...)
}

// finishBotOn is finishBot over the display chat returns once the bot has
// stopped (a rule1.Multi of several platforms: the emulator's and a
// homeserver's), channels naming conversations of any of them.
func finishBotOn(t *testing.T, h *harness, chat func() rule1.Display, channels ...string) *bolt.Store {
	t.Helper()
	if err := h.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	st, err := bolt.Open(h.cfg.Store.Path, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	problems, err := rule1.Check(context.Background(), chat(), st, channels, h.refused)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("rule 1: %s", p)
	}
	for _, v := range h.emu.Violations() {
		t.Errorf("OpenAPI violation: %s", v)
	}
	return st
}

// waitUntil blocks until cond holds, re-checking on every emulator change.
func waitUntil(t *testing.T, h *harness, what string, cond func() bool) {
	t.Helper()
	if err := h.waitFor(t.Context(), what, cond); err != nil {
		t.Fatal(err)
	}
}

// countContaining counts the messages whose content contains sub.
func countContaining(msgs []discordtest.Message, sub string) int {
	n := 0
	for _, m := range msgs {
		if strings.Contains(m.Content, sub) {
			n++
		}
	}
	return n
}

// discordRef is the conversation of a Discord channel or thread.
func discordRef(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
