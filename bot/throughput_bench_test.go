package bot

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// BenchmarkBoundCompletionThroughput delivers 500 completions across 50
// bound threads (10 parent channels, so 10 persona webhooks) through the
// real Outbound and adapter, while the emulator enforces a per-webhook
// bucket and a global limit. It reports the achieved rate as a fraction of
// the most those limits allow (target ≥ 0.9) and the 429s served (target:
// at most one per bucket), and fails on any lost or duplicated delivery.
//
//	go test -run '^$' -bench BoundCompletionThroughput -benchtime 1x ./bot/
func BenchmarkBoundCompletionThroughput(b *testing.B) {
	const (
		parents    = 10
		perParent  = 5 // threads per parent channel
		total      = 500
		hookLimit  = 5 // requests per window per webhook
		hookWindow = 200 * time.Millisecond
		global     = 500 // requests per second across routes (Discord: 50/s; scaled with the windows)
	)
	b.StopTimer()
	for n := 0; n < b.N; n++ {
		ctx := context.Background()
		h, err := newHarness(harnessOptions{Dir: b.TempDir(), Log: zerolog.Nop(), Emulator: discordtest.Options{DisableReferee: true}})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.start(ctx); err != nil {
			b.Fatal(err)
		}
		var threads []binding.Record
		for p := 0; p < parents; p++ {
			parent, err := h.emu.AddTextChannel(h.guild.ID, fmt.Sprintf("work-%d", p))
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < perParent; i++ {
				th, err := h.emu.AddThread(parent.ID, fmt.Sprintf("🤖 t%d-%d", p, i), h.alice.ID)
				if err != nil {
					b.Fatal(err)
				}
				rec, err := h.app.bindings.Bind(ctx, binding.BindInput{TargetSessionKey: fmt.Sprintf("agent:main:subagent:b%d-%d", p, i), TargetKind: binding.KindSubagent,
					Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: th.ID, ParentConversationID: parent.ID}, AgentID: "main", BoundBy: "system"})
				if err != nil {
					b.Fatal(err)
				}
				threads = append(threads, rec)
			}
		}
		// Wait until the bot's gateway state has every thread (deliveries check thread state).
		// Create the webhooks first (one per parent) so the measured part is steady-state sending.
		for p := 0; p < parents; p++ {
			rec := threads[p*perParent]
			if _, err := h.app.outbound.Deliver(ctx, delivery.Delivery{ID: fmt.Sprintf("warm-%d", p), Target: rec.Conversation, Text: "warming up",
				ViaWebhook: true, BindingID: rec.ID, Persona: delivery.Persona{Name: "🤖 bench"}, Producer: delivery.Producer{Source: transcript.SourceIntro, AgentID: "main"}}, nil); err != nil {
				b.Fatal(err)
			}
		}
		h.emu.SetRateLimit(discordtest.RateLimit{Method: "POST", Route: "/webhooks/{webhook_id}/{webhook_token}", Limit: hookLimit, Window: hookWindow})
		h.emu.SetGlobalLimit(global, time.Second)

		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, total)
		for t, rec := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < total/len(threads); i++ {
					_, err := h.app.outbound.Deliver(ctx, delivery.Delivery{ID: fmt.Sprintf("announce:%d:%d", t, i), Target: rec.Conversation, Text: fmt.Sprintf("result %d of thread %d", i, t),
						ViaWebhook: true, BindingID: rec.ID, Persona: delivery.Persona{Name: "🤖 bench"}, Producer: delivery.Producer{Source: transcript.SourceAnnounce, AgentID: "main"}}, nil)
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Errorf("delivery failed: %v", err)
		}
		displayed := 0
		for _, rec := range threads {
			displayed += len(h.emu.Messages(rec.Conversation.ConversationID))
		}
		if want := total + parents; displayed != want {
			b.Errorf("threads display %d messages, want %d (no loss, no duplicates)", displayed, want)
		}
		// The limits allow parents*hookLimit sends per window, the first
		// window at once: the fastest the 500 can go is this long.
		windows := (total+parents*hookLimit-1)/(parents*hookLimit) - 1
		fastest := time.Duration(windows) * hookWindow
		if g := time.Duration(float64(total-1) / global * float64(time.Second)); g > fastest {
			fastest = g
		}
		stats := h.emu.RateLimited()
		b.ReportMetric(float64(total)/elapsed.Seconds(), "deliveries/s")
		b.ReportMetric(fastest.Seconds()/elapsed.Seconds(), "fraction-of-max")
		b.ReportMetric(float64(stats.Total), "429s")
		b.ReportMetric(float64(len(stats.ByBucket)), "buckets-hit")
		if err := h.close(); err != nil {
			b.Fatal(err)
		}
	}
}
