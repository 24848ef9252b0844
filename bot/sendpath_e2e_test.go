package bot

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/model"
)

// End-to-end tests of the send path (issue 12: defects 4, 5, 11, 12).

const resetText = "Started a new conversation here"

// TestInteractionReplyNeverPostedTwice (defect 4): a public slash-command
// reply whose outcome is unknown - the callback's response was dropped, or
// GET @original fails - is reconciled through @original and never posted a
// second time as a channel message; the one displayed copy is in the
// transcript (after a restart's recovery when the id was unknown).
func TestInteractionReplyNeverPostedTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault discordtest.Fault
	}{
		{"dropped callback response", discordtest.Fault{Method: "POST", Path: "/interactions/*/*/callback", Mode: discordtest.FaultDropAfterCommit}},
		{"GET @original failing", discordtest.Fault{Method: "GET", Path: "/webhooks/*/*/messages/@original", Status: 500, Times: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := startBot(t, nil, nil)
			h.emu.InjectFault(tc.fault)
			in := adInvoke(t, h, h.general.ID, "reset")
			adResponded(t, h, in)
			eventually(t, "the reply attempt to settle", func() bool {
				rec, ok, err := h.app.store.GetDelivery(t.Context(), "cmd:"+in.ID)
				return err == nil && ok && (rec.State != "pending" || rec.Error != "")
			})
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			h.emu.ClearFaults()
			if err := h.start(t.Context()); err != nil { // Recover finishes a pending reply
				t.Fatal(err)
			}
			eventually(t, "the reply recorded", func() bool {
				ok, err := h.app.outbound.Delivered(t.Context(), "cmd:"+in.ID)
				return err == nil && ok
			})
			if n := countContaining(h.emu.Messages(h.general.ID), resetText); n != 1 {
				t.Fatalf("reply displayed %d times, want 1: %+v", n, h.emu.Messages(h.general.ID))
			}
			finishBot(t, h, h.general.ID)
		})
	}
}

// fixedModel answers every request with the same text.
type fixedModel struct{ text string }

func (m fixedModel) Complete(context.Context, model.Request) (model.Response, error) {
	return model.Response{Text: m.text}, nil
}

// TestLongReplyLaterPartFailsRecordsShownParts (defect 5): when part 2 of
// a long reply fails permanently (50013), the transcript holds exactly the
// part displayed (Rule 1), and the failure is reported.
func TestLongReplyLaterPartFailsRecordsShownParts(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 500) // 2500 characters: two parts
	h := startBot(t, fixedModel{text: long}, nil)
	// The first message create (the reply's part 1) passes; the second fails.
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/messages"})
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/messages", Status: 403, Code: 50013, Message: "Missing Permissions"})
	adSay(t, h, h.general.ID, adMention(h)+"say a lot")
	waitUntil(t, h, "the failed second part", func() bool {
		posts := h.emu.RequestsTo("POST", "/channels/{channel_id}/messages")
		return len(posts) == 2 && posts[1].Status == 403
	})
	eventually(t, "the delivery to finish", func() bool {
		recs, err := h.app.store.Deliveries(t.Context(), "failed", 0)
		return err == nil && len(recs) == 1
	})
	if msgs := h.emu.Messages(h.general.ID); len(msgs) != 2 || !strings.HasPrefix(long, msgs[1].Content) || len(msgs[1].Content) >= len(long) {
		t.Fatalf("displayed %+v, want the mention and part 1", msgs)
	}
	finishBot(t, h, h.general.ID) // Rule 1: part 1 is in the transcript, with its text
}

// startFakeClockBot starts the bot and the emulator on one fake clock.
func startFakeClockBot(t *testing.T, configure func(*config.Config)) (*harness, *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(time.Now().UTC().Truncate(time.Second))
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Clock: fake, Configure: configure, Emulator: discordtest.Options{Now: fake.Now}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return h, fake
}

// TestBotResendAfterNonceWindowReconciles (defect 12): a reply displayed
// but never confirmed (every response dropped) stays pending; recovered
// after the nonce window (Discord forgets nonces after a few minutes) it is
// found by reading the channel, not posted again.
func TestBotResendAfterNonceWindowReconciles(t *testing.T) {
	t.Parallel()
	h, fake := startFakeClockBot(t, nil)
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/messages", Mode: discordtest.FaultDropAfterCommit, Times: -1})
	adSay(t, h, h.general.ID, adMention(h)+"are you there")
	waitUntil(t, h, "the reply attempts", func() bool {
		return len(h.emu.RequestsTo("POST", "/channels/{channel_id}/messages")) >= 5
	})
	eventually(t, "the reply left pending", func() bool {
		recs, err := h.app.store.Deliveries(t.Context(), "pending", 0)
		return err == nil && len(recs) == 1 && recs[0].Error != ""
	})
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.emu.ClearFaults()
	fake.Advance(10 * time.Minute) // long downtime: the nonce is forgotten
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the recovered reply", func() bool {
		recs, err := h.app.store.Deliveries(t.Context(), "pending", 0)
		return err == nil && len(recs) == 0
	})
	if msgs := h.emu.Messages(h.general.ID); len(msgs) != 2 {
		t.Fatalf("#general shows %d messages, want the mention and one reply: %+v", len(msgs), msgs)
	}
	finishBot(t, h, h.general.ID)
}

// TestWebhookReconcileIgnoresEarlierIdenticalMessage (defect 11): a
// webhook retry after an ambiguous failure looks only at messages this
// delivery could have created; an identical reply posted earlier by the
// same persona is not taken for it.
func TestWebhookReconcileIgnoresEarlierIdenticalMessage(t *testing.T) {
	t.Parallel()
	h, fake := startFakeClockBot(t, nil)
	thread := adSpawnThread(t, h, "same", "twin")
	waitUntil(t, h, "the completion", func() bool { return countContaining(h.emu.Messages(thread), "finished:") == 1 })
	adSay(t, h, thread, "once")
	waitUntil(t, h, "the first reply", func() bool { return countContaining(h.emu.Messages(thread), "Done: same") == 1 })
	fake.Advance(5 * time.Minute)
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/webhooks/{webhook_id}/{webhook_token}", Status: 500})
	adSay(t, h, thread, "twice")
	waitUntil(t, h, "the second reply", func() bool { return countContaining(h.emu.Messages(thread), "Done: same") == 2 })
	finishBot(t, h, h.general.ID, thread)
}

// eventually re-checks a store condition (which emulator changes do not
// signal) until it holds or the test's context ends.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// TestRateLimitStormInOneChannelStallsNoOther (defect 16): while #general
// answers every message create with 429, another channel's message is
// answered, and a slash command in #general itself is answered within
// Discord's 3 s: one conversation's retries hold up no other work.
func TestRateLimitStormInOneChannelStallsNoOther(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	other, err := h.emu.AddTextChannel(h.guild.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/" + h.general.ID + "/messages", Status: 429, RetryAfter: 30 * time.Millisecond, Times: -1})
	stormed := func() int { return len(h.emu.RequestsTo("POST", "/channels/{channel_id}/messages")) }
	adSay(t, h, h.general.ID, adMention(h)+"first in the storm")
	waitUntil(t, h, "the storm to start", func() bool { return stormed() >= 2 })
	adSay(t, h, h.general.ID, adMention(h)+"second in the storm")
	adSay(t, h, other.ID, adMention(h)+"calm here")
	waitUntil(t, h, "the reply in the calm channel", func() bool {
		return countContaining(h.emu.Messages(other.ID), "echo:") == 1
	})
	in := adInvoke(t, h, h.general.ID, "reset")
	if r := adResponded(t, h, in); !strings.Contains(r.Content, resetText) {
		t.Fatalf("/reset answered %q", r.Content)
	}
	// Ordering, not speed: all this happened while #general still could not post.
	if n := countContaining(h.emu.Messages(h.general.ID), "echo:"); n != 0 {
		t.Fatalf("#general shows %d replies during the storm", n)
	}
	h.emu.ClearFaults()
	waitUntil(t, h, "#general's replies after the storm", func() bool {
		return countContaining(h.emu.Messages(h.general.ID), "echo:") == 2
	})
	finishBot(t, h, h.general.ID, other.ID)
}

// TestSlowCommandIsDeferred (invariant 15): a command still running after
// 1.5 s is deferred (type 5, ephemeral "thinking") within Discord's 3 s; its
// public reply is a followup, displayed once where it is posted and in the
// transcript in display order, and the placeholder is settled.
func TestSlowCommandIsDeferred(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/threads", Latency: 2500 * time.Millisecond})
	in := adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "slow"), adOpt("label", "slow"), adOpt("thread", true))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got, err := h.emu.WaitResponses(ctx, in.ID, 3)
	if err != nil {
		t.Fatalf("responses: %v", err)
	}
	if r := got.Responses[0]; r.Kind != "callback" || r.Type != 5 || !r.Ephemeral {
		t.Fatalf("first response %+v, want an ephemeral deferred callback", r)
	}
	if r := got.Responses[1]; r.Kind != "followup" || r.Ephemeral || !strings.Contains(r.Content, "Started subagent") {
		t.Fatalf("second response %+v, want the public reply as a followup", r)
	}
	if r := got.Responses[2]; r.Kind != "edit-original" || !r.Ephemeral {
		t.Fatalf("third response %+v, want the placeholder settled", r)
	}
	waitUntil(t, h, "the thread's intro", func() bool {
		ths := h.emu.Threads(h.general.ID)
		return len(ths) == 1 && countContaining(h.emu.Messages(ths[0].ID), "session active") == 1
	})
	if n := countContaining(h.emu.Messages(h.general.ID), "Started subagent"); n != 1 {
		t.Fatalf("reply displayed %d times", n)
	}
	finishBot(t, h, h.general.ID, h.emu.Threads(h.general.ID)[0].ID)
}

// TestResendAfterKillPastStrictNonceWindow (issue 27.10): a reply whose
// process died at any point of its send, restarted 3 s later against a
// Discord double that honours enforce_nonce for 2 s only, is displayed
// exactly once: the resend reads the channel for what the first attempt
// may have created whatever the delivery's age (it trusted the nonce alone
// for two minutes, and Discord's window is unspecified).
func TestResendAfterKillPastStrictNonceWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault discordtest.Fault
	}{
		// The process dies before its post reaches Discord (every attempt refused, nothing committed).
		{"before the post", discordtest.Fault{Method: "POST", Path: "/channels/*/messages", Status: 500, Times: -1}},
		// Discord accepted the post; the process never learnt the message id.
		{"post accepted, response lost", discordtest.Fault{Method: "POST", Path: "/channels/*/messages", Mode: discordtest.FaultDropAfterCommit, Times: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(time.Now().UTC().Truncate(time.Second))
			log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
			h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Clock: fake,
				Emulator: discordtest.Options{Now: fake.Now, NonceWindow: 2 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.close() })
			if err := h.start(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.emu.InjectFault(tc.fault)
			adSay(t, h, h.general.ID, adMention(h)+"are you there")
			waitUntil(t, h, "the reply attempts", func() bool {
				return len(h.emu.RequestsTo("POST", "/channels/{channel_id}/messages")) >= 5
			})
			eventually(t, "the reply left pending", func() bool {
				recs, err := h.app.store.Deliveries(t.Context(), "pending", 0)
				return err == nil && len(recs) == 1 && recs[0].Error != ""
			})
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			h.emu.ClearFaults()
			fake.Advance(3 * time.Second) // down 3 s: past the double's nonce window
			if err := h.start(t.Context()); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the recovered reply", func() bool {
				recs, err := h.app.store.Deliveries(t.Context(), "pending", 0)
				return err == nil && len(recs) == 0
			})
			if msgs := h.emu.Messages(h.general.ID); len(msgs) != 2 {
				t.Fatalf("#general shows %d messages, want the mention and one reply: %+v", len(msgs), msgs)
			}
			finishBot(t, h, h.general.ID)
		})
	}
}
