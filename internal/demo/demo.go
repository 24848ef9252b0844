// Package demo is `bot demo`'s story: the real application against the
// built-in Discord emulator with the echo model, what each channel
// displayed next to what its transcripts hold, then the invariant checks.
package demo

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/internal/world"
	"github.com/agentbot/agentbot/store/bolt"
)

// Play runs the story with the store in dir and returns how many
// invariant checks failed.
func Play(ctx context.Context, dir string, log zerolog.Logger, w io.Writer) (int, error) {
	h, err := world.New(world.Options{Dir: dir})
	if err != nil {
		return 0, err
	}
	defer h.Close()
	app, err := bot.New(bot.Options{Config: h.Cfg, RetryBackoff: 10 * time.Millisecond, MCPBackoff: 100 * time.Millisecond}, bot.Deps{Log: log})
	if err != nil {
		return 0, err
	}
	run, err := h.Start(ctx, app)
	if err != nil {
		return 0, err
	}
	defer run.Stop()
	emu, general, alice := h.Emu, h.General.ID, h.Alice.ID
	botMention := "<@" + emu.BotUserID() + ">"
	step := func(s string) { fmt.Fprintf(w, "▶ %s\n", s) }

	step("alice mentions the bot in #general")
	if _, err := emu.UserSay(general, alice, botMention+" hello there"); err != nil {
		return 0, err
	}
	if err := h.WaitFor(ctx, "the reply", func() bool { return len(emu.Messages(general)) >= 2 }); err != nil {
		return 0, err
	}

	step("alice runs /spawn task:\"summarise the plan\" label:planner thread:true")
	if _, err := emu.InvokeCommand(general, alice, "spawn", discordtest.CommandOption{Name: "task", Value: "summarise the plan"},
		discordtest.CommandOption{Name: "label", Value: "planner"}, discordtest.CommandOption{Name: "thread", Value: true}); err != nil {
		return 0, err
	}
	var thread string
	if err := h.WaitFor(ctx, "the subagent's thread with its intro and completion", func() bool {
		ths := emu.Threads(general)
		if len(ths) == 0 {
			return false
		}
		thread = ths[0].ID
		return len(emu.Messages(thread)) >= 2
	}); err != nil {
		return 0, err
	}

	step("alice adds a background job and runs it now: /cron add schedule:\"every 1h\" target:isolated, then /cron run")
	if _, err := emu.InvokeCommand(general, alice, "cron", discordtest.CommandOption{Name: "add", Value: []discordtest.CommandOption{
		{Name: "schedule", Value: "every 1h"}, {Name: "prompt", Value: "post the daily digest"}, {Name: "target", Value: "isolated"}}}); err != nil {
		return 0, err
	}
	var jobID string
	if err := h.WaitFor(ctx, "the job", func() bool {
		jobs, err := app.Scheduler().List(ctx)
		if err == nil && len(jobs) == 1 {
			jobID = jobs[0].ID
		}
		return jobID != "" && len(emu.Messages(general)) >= 4
	}); err != nil {
		return 0, err
	}
	before := len(emu.Messages(general))
	if _, err := emu.InvokeCommand(general, alice, "cron", discordtest.CommandOption{Name: "run", Value: []discordtest.CommandOption{{Name: "id", Value: jobID}}}); err != nil {
		return 0, err
	}
	if err := h.WaitFor(ctx, "the job's result and the run reply", func() bool { return len(emu.Messages(general)) >= before+2 }); err != nil {
		return 0, err
	}

	step("alice runs /reset, then talks to the bot again")
	before = len(emu.Messages(general))
	if _, err := emu.InvokeCommand(general, alice, "reset"); err != nil {
		return 0, err
	}
	if err := h.WaitFor(ctx, "the reset reply", func() bool { return len(emu.Messages(general)) >= before+1 }); err != nil {
		return 0, err
	}
	if _, err := emu.UserSay(general, alice, botMention+" are you fresh?"); err != nil {
		return 0, err
	}
	if err := h.WaitFor(ctx, "the reply after reset", func() bool { return len(emu.Messages(general)) >= before+3 }); err != nil {
		return 0, err
	}
	if err := run.Stop(); err != nil {
		return 0, err
	}
	return report(ctx, w, emu, h.Cfg.Store.Path, general, thread)
}

// report prints, per channel, what it displayed next to what its
// transcripts hold, then the invariant checks; it returns how many failed.
func report(ctx context.Context, w io.Writer, emu *discordtest.Emulator, storePath, general, thread string) (int, error) {
	st, err := bolt.Open(storePath, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	channels := map[string]string{"#general": general, "🧵 thread " + thread: thread}
	for _, name := range slices.Sorted(maps.Keys(channels)) {
		id := channels[name]
		fmt.Fprintf(w, "\n%s (%s)\n  displayed:\n", name, id)
		for _, m := range emu.Messages(id) {
			fmt.Fprintf(w, "    [%s] %s: %s\n", m.ID, m.Author.Username, oneLine(m.Content))
		}
		keys := []string{sessionkey.ForConversation("main", discordRef(id))}
		if id == thread {
			if recs, _ := st.Bindings(ctx); len(recs) > 0 {
				keys = append([]string{recs[0].TargetSessionKey}, keys...)
			}
		}
		for _, key := range keys {
			entries, err := st.Range(ctx, key, 0, 0)
			if err != nil || len(entries) == 0 {
				continue
			}
			fmt.Fprintf(w, "  transcript %s:\n", key)
			for _, e := range entries {
				fmt.Fprintf(w, "    #%d gen%d %-9s %-12s %v %s\n", e.Seq, e.Generation, e.Role, e.Source, e.MessageIDs, oneLine(e.Text))
			}
		}
	}
	return printChecks(ctx, w, emu, st, general, thread)
}

func printChecks(ctx context.Context, w io.Writer, emu *discordtest.Emulator, st *bolt.Store, general, thread string) (int, error) {
	problems, err := rule1.Check(ctx, rule1.Emulator(emu), st, []string{general, thread}, nil)
	if err != nil {
		return 0, err
	}
	fmt.Fprintln(w, "\ninvariant checks:")
	failed := 0
	check := func(ok bool, what string) {
		mark := "✔"
		if !ok {
			mark, failed = "✘", failed+1
		}
		fmt.Fprintf(w, "  %s %s\n", mark, what)
	}
	check(len(problems) == 0, "Rule 1: every bot message displayed is in exactly one transcript entry, with identical text, in display order")
	for _, p := range problems {
		fmt.Fprintf(w, "      %s\n", p)
	}
	inParent := 0
	for _, m := range emu.Messages(general) {
		if strings.Contains(m.Content, "finished:") {
			inParent++
		}
	}
	inThread := 0
	for _, m := range emu.Messages(thread) {
		if strings.Contains(m.Content, "finished:") && m.WebhookID != "" {
			inThread++
		}
	}
	check(inThread == 1 && inParent == 0, fmt.Sprintf("the subagent's completion is in its thread once (%d) and not in #general (%d)", inThread, inParent))
	mentionsOK := true
	for _, ch := range []string{general, thread} {
		for _, m := range emu.Messages(ch) {
			if (m.Author.ID == emu.BotUserID() || m.WebhookID != "") && m.InteractionID == "" && !strings.Contains(string(m.AllowedMentions), `"parse":[]`) {
				mentionsOK = false
			}
		}
	}
	check(mentionsOK, "every bot message was sent with allowed_mentions parse:[] (nothing pings)")
	check(len(emu.Violations()) == 0, fmt.Sprintf("every request matched Discord's OpenAPI description (%d requests)", len(emu.Requests())))
	return failed, nil
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ⏎ ") }

// discordRef is a Discord conversation on the bot's (only) account.
func discordRef(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: id}
}
