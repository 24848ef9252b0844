package bot

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
)

// stampTransport records when the bot hands its first message post to
// the HTTP transport (before the emulator sees it: its latency is not
// counted).
type stampTransport struct {
	base http.RoundTripper
	post chan time.Time
}

func (s *stampTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/messages") {
		select {
		case s.post <- time.Now():
		default:
		}
	}
	return s.base.RoundTrip(r)
}

func streamConfig(c *config.Config) {
	mc := c.Models["default"]
	mc.Stream = true
	c.Models["default"] = mc
	c.Discord.Access.RateLimit.Turns, c.Discord.Access.RateLimit.GuildTurns = 0, 0
}

// BenchmarkStreamFirstRequest measures the latency the bot adds between
// the model's first token and the first Discord request (the post of the
// reply): outbox write, routing, the adapter's checks, up to the HTTP
// transport (the emulator's own latency excluded). It reports the median
// and p99 in ms.
func BenchmarkStreamFirstRequest(b *testing.B) {
	sm := modeltest.NewStreaming()
	st := &stampTransport{post: make(chan time.Time, 1)}
	h, err := newHarness(harnessOptions{Dir: b.TempDir(), Log: zerolog.Nop(), Provider: sm, Configure: streamConfig})
	if err != nil {
		b.Fatal(err)
	}
	st.base = h.emu.Transport()
	h.base = st
	b.Cleanup(func() { _ = h.close() })
	if err := h.start(b.Context()); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> go"); err != nil {
			b.Fatal(err)
		}
		c, err := sm.Next(10 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		select { // drop a stamp left by anything before
		case <-st.post:
		default:
		}
		t0 := time.Now()
		c.Send("first")
		var t1 time.Time
		select {
		case t1 = <-st.post:
		case <-time.After(10 * time.Second):
			b.Fatal("no post after the first token")
		}
		lat = append(lat, t1.Sub(t0))
		c.End(model.Response{})
		n := i + 1
		if err := h.waitFor(b.Context(), "the reply", func() bool {
			return len(botMsgs(h, h.general.ID)) == n && len(botMsgs(h, h.general.ID)[n-1].Buttons()) == 0
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "median-ms")
	b.ReportMetric(ms(lat[(len(lat)*99)/100]), "p99-ms")
}

// fakeAfter paces with the fake clock: fire moves it and ends every wait.
type fakeAfter struct {
	mu    sync.Mutex
	clk   *clock.Fake
	chans []chan time.Time
	regs  int
}

func (a *fakeAfter) after(time.Duration) <-chan time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := make(chan time.Time, 1)
	a.chans = append(a.chans, c)
	a.regs++
	return c
}

func (a *fakeAfter) registrations() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.regs
}

func (a *fakeAfter) fire(d time.Duration) {
	now := a.clk.Advance(d)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.chans {
		c <- now
	}
	a.chans = nil
}

// TestE2EStream30sNoEditRateLimit streams a reply for 30 s (of a fake clock
// shared by the bot's pacing and the emulator's rate limiter, so the test
// takes no 30 s) with text every 100 ms: the emulator's edit limit (5 per
// 5 s per channel) never answers 429, each message gets at most one
// request per second, and Rule 1 holds. It logs the edits per second.
func TestE2EStream30sNoEditRateLimit(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	fa := &fakeAfter{clk: clk}
	sm := modeltest.NewStreaming()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Provider: sm, Configure: streamConfig,
		Emulator: discordtest.Options{Now: clk.Now}, LiveAfter: fa.after})
	if err != nil {
		t.Fatal(err)
	}
	h.clock = clk
	t.Cleanup(func() { _ = h.close() })
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	adSay(t, h, h.general.ID, adMention(h)+"talk for 30 seconds")
	c := nextCall(t, sm)
	var sent strings.Builder
	shown := func() (string, bool) {
		msgs := botMsgs(h, h.general.ID)
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString(m.Content)
		}
		return b.String(), len(msgs) > 0 && len(msgs[len(msgs)-1].Buttons()) == 0
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// settle waits until the bot's pacing reacted: it waits for its next
	// edit (a new pacing wait) or the chat shows everything sent.
	settle := func(regs int, needFinal bool) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			if got, final := shown(); got == sent.String() && (final || !needFinal) || fa.registrations() > regs {
				return
			}
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatal("the bot did not react to the stream")
			}
		}
	}
	for i := 0; i < 300; i++ {
		regs := fa.registrations()
		c.Send("word ")
		sent.WriteString("word ")
		settle(regs, false)
		regs = fa.registrations()
		fa.fire(100 * time.Millisecond)
		settle(regs, false)
	}
	c.End(model.Response{})
	for {
		if got, final := shown(); got == sent.String() && final {
			break
		}
		regs := fa.registrations()
		fa.fire(100 * time.Millisecond)
		settle(regs, true)
	}
	finishBot(t, h, h.general.ID)
	edits, limited := editRequests(h)
	if limited != 0 {
		t.Fatalf("%d of %d edits got a 429", limited, len(edits))
	}
	for i := range edits {
		n := 0
		for j := i; j < len(edits) && edits[j].Time.Sub(edits[i].Time) < 5*time.Second; j++ {
			n++
		}
		if n > discordtest.EditLimit.Limit {
			t.Fatalf("%d edits within 5 s from edit %d", n, i)
		}
	}
	span := edits[len(edits)-1].Time.Sub(edits[0].Time)
	if len(edits) < 25 {
		t.Fatalf("%d edits in a 30 s stream: the message was not kept current", len(edits))
	}
	t.Logf("%d edits over %s of stream (one message): %.2f edits per message per second, none rate limited", len(edits), span, float64(len(edits)-1)/span.Seconds())
}
