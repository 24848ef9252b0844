package bot

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/transcript"
	modelusage "github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
)

// TestE2EFallbackAnswersAndUsageIsRecorded: the agent's OpenAI-compatible
// model answers 503; its fallback (Anthropic) answers within the same turn.
// The chat shows one reply with the footer naming the fallback, the
// transcript entry carries the model and tokens, and the usage record
// has the user, the server, the tokens and the cost at the fallback's price.
func TestE2EFallbackAnswersAndUsageIsRecorded(t *testing.T) {
	t.Parallel()
	const key = "sk-test-0123456789abcdef"
	of, af := modeltest.NewOpenAIFake(t, key), modeltest.NewAnthropicFake(t, key)
	of.Respond(func(modeltest.Body) modeltest.Reply { return modeltest.Reply{Status: 503, Message: "unavailable"} })
	af.Respond(func(modeltest.Body) modeltest.Reply {
		return modeltest.Reply{Text: "from backup", Usage: model.Usage{Input: 300, Output: 20, Cached: 100}}
	})
	h := startBot(t, nil, func(cfg *config.Config) {
		cfg.Models[config.DefaultModelName] = config.ModelConfig{Provider: "openai", BaseURL: of.URL, APIKey: key, Model: "gpt-test",
			MaxHistory: 50, Timeout: 10e9, Fallbacks: []string{"backup"}, Footer: true}
		cfg.Models["backup"] = config.ModelConfig{Provider: "anthropic", BaseURL: af.URL, APIKey: key, Model: "claude-test",
			MaxHistory: 50, Timeout: 10e9, Price: config.PriceConfig{Input: 3, Output: 15}}
	})
	if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> hello"); err != nil {
		t.Fatal(err)
	}
	msgs, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := msgs[1].Content; got != "from backup\n\n— backup" {
		t.Fatalf("reply %q", got)
	}
	if n := len(of.Requests()); n != 1 {
		t.Fatalf("primary got %d requests, want 1 (no SDK retries under a fallback)", n)
	}
	st := finishBot(t, h, h.general.ID)
	es := seEntries(t, st, seChannelKey(h.general.ID))
	last := es[len(es)-1]
	if last.Source != transcript.SourceTurn || last.Model != "backup" || last.Usage == nil || *last.Usage != (transcript.Usage{Input: 300, Output: 20}) {
		t.Fatalf("reply entry %+v usage %+v", last, last.Usage)
	}
	rs, err := st.Usage(t.Context(), modelusage.Filter{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("usage records %+v %v", rs, err)
	}
	r := rs[0]
	if r.Model != "backup" || r.Agent != "main" || r.User != h.alice.ID || r.Place != h.guild.ID || r.Conversation != h.general.ID ||
		r.Input != 300 || r.Output != 20 || r.Cached != 100 || math.Abs(r.Cost-(300*3+20*15)/1e6) > 1e-12 || !strings.HasPrefix(r.Run, "turn:") {
		t.Fatalf("usage record %+v", r)
	}
	// The scripting contract: transcript entries carry model and usage,
	// and inspect usage lists the record.
	var out strings.Builder
	if err := (inspector{store: st}).write(t.Context(), &out, "transcript", []string{seChannelKey(h.general.ID)}, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"model":"backup","usage":{"input":300,"output":20}`) {
		t.Fatalf("inspect transcript -json:\n%s", out.String())
	}
	out.Reset()
	if err := (inspector{store: st}).write(t.Context(), &out, "usage", nil, true); err != nil {
		t.Fatal(err)
	}
	var got modelusage.Record
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || got != r {
		t.Fatalf("inspect usage -json: %q (%v), want %+v", out.String(), err, r)
	}
}

// TestE2EBudgetHoldsAcrossRestart: /usage sums what the provider reported;
// once alice's tokens reach access.budget her next message gets one notice
// and no model call, and after a restart (the budget read back from the
// store) her messages still get no model call.
func TestE2EBudgetHoldsAcrossRestart(t *testing.T) {
	t.Parallel()
	const key = "sk-test-0123456789abcdef"
	af := modeltest.NewAnthropicFake(t, key)
	af.Respond(func(modeltest.Body) modeltest.Reply {
		return modeltest.Reply{Text: "answered", Usage: model.Usage{Input: 300, Output: 20}}
	})
	h := startBot(t, nil, func(cfg *config.Config) {
		cfg.Models[config.DefaultModelName] = config.ModelConfig{Provider: "anthropic", BaseURL: af.URL, APIKey: key, Model: "claude-test",
			MaxHistory: 50, Timeout: 10e9, Price: config.PriceConfig{Input: 3, Output: 15}}
		cfg.Access.Budget = config.BudgetConfig{Tokens: 300, Per: 24 * time.Hour}
	})
	mention := "<@" + h.emu.BotUserID() + "> "
	say := func(text string, want int) []discordtest.Message {
		t.Helper()
		if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, mention+text); err != nil {
			t.Fatal(err)
		}
		msgs, err := h.emu.WaitMessages(t.Context(), h.general.ID, want)
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	say("one", 2)
	// The reply's usage is written with its entry, a moment after the chat
	// shows it; a stop waits for the turn to end.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	in, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "usage", discordtest.CommandOption{Name: "period", Value: "day"})
	if err != nil {
		t.Fatal(err)
	}
	if r := adResponded(t, h, in); !strings.Contains(r.Content, "Your usage, last day: 320 tokens (300 in, 20 out, 0 cached) in 1 calls, cost 0.0012") {
		t.Fatalf("/usage answered %q", r.Content)
	}
	msgs := say("two", 4)
	if !strings.Contains(msgs[3].Content, "⏳ your usage budget (300 tokens per 24h0m0s) is spent") {
		t.Fatalf("over the budget: %q", msgs[3].Content)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	say("three", 6) // a new process tells once more (its notice memory is its own)
	if n := len(af.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want 1", n)
	}
	finishBot(t, h, h.general.ID)
}

// TestE2EDeadModelSkippedAndReported: a primary answering 503 to every
// call is tried three times (each turn answered by the fallback), then its
// breaker opens: the fourth turn does not call it, /readyz stays 200 and
// names it, and the metrics show the breaker, the fallbacks and the tokens.
func TestE2EDeadModelSkippedAndReported(t *testing.T) {
	t.Parallel()
	const key = "sk-test-0123456789abcdef"
	of, af := modeltest.NewOpenAIFake(t, key), modeltest.NewAnthropicFake(t, key)
	of.Respond(func(modeltest.Body) modeltest.Reply { return modeltest.Reply{Status: 503, Message: "unavailable"} })
	af.Respond(func(modeltest.Body) modeltest.Reply {
		return modeltest.Reply{Text: "from backup", Usage: model.Usage{Input: 7, Output: 3}}
	})
	h := startBot(t, nil, func(cfg *config.Config) {
		cfg.HTTP.Listen = "127.0.0.1:0"
		cfg.Models[config.DefaultModelName] = config.ModelConfig{Provider: "openai", BaseURL: of.URL, APIKey: key, Model: "gpt-test",
			MaxHistory: 50, Timeout: 10e9, Fallbacks: []string{"backup"}}
		cfg.Models["backup"] = config.ModelConfig{Provider: "anthropic", BaseURL: af.URL, APIKey: key, Model: "claude-test", MaxHistory: 50, Timeout: 10e9}
	})
	var addr string
	select {
	case addr = <-h.app.httpAddr:
	case <-time.After(10 * time.Second):
		t.Fatal("the HTTP server did not start")
	}
	for i := 1; i <= 4; i++ {
		if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> hello"); err != nil {
			t.Fatal(err)
		}
		msgs, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2*i)
		if err != nil {
			t.Fatal(err)
		}
		if got := msgs[2*i-1].Content; got != "from backup" {
			t.Fatalf("turn %d answered %q", i, got)
		}
	}
	if n := len(of.Requests()); n != 3 {
		t.Fatalf("the dead model got %d requests, want 3 (then skipped)", n)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusOK || !strings.Contains(body, "model default (open)") {
		t.Errorf("/readyz = %d %q", code, body)
	}
	_, m := get("/metrics")
	for _, want := range []string{`agentbot_model_breaker{model="default",state="open"} 1`, `agentbot_model_fallbacks_total{from="default",to="backup"} 4`,
		`agentbot_model_calls_total{model="default",outcome="server"} 3`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	finishBot(t, h, h.general.ID)
	// Tokens are counted when a turn's usage is written (with its reply
	// entry, after the chat showed the reply): read once the bot stopped.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(h.app.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `agentbot_tokens_total{agent="main",kind="input",model="backup"} 28`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %s", want)
	}
}

// TestE2EStreamedUsageFromBothSDKsSummedByUsage: streamed replies from
// both SDKs (OpenAI-compatible, then its Anthropic fallback after a 503)
// record the tokens the streams reported, and /usage sums them per model.
func TestE2EStreamedUsageFromBothSDKsSummedByUsage(t *testing.T) {
	t.Parallel()
	const key = "sk-test-0123456789abcdef"
	of, af := modeltest.NewOpenAIFake(t, key), modeltest.NewAnthropicFake(t, key)
	var calls atomic.Int32
	of.Respond(func(modeltest.Body) modeltest.Reply {
		if calls.Add(1) == 2 {
			return modeltest.Reply{Status: 503, Message: "unavailable"}
		}
		return modeltest.Reply{Text: "from default", Usage: model.Usage{Input: 100, Output: 10, Cached: 50}}
	})
	af.Respond(func(modeltest.Body) modeltest.Reply {
		return modeltest.Reply{Text: "from backup", Usage: model.Usage{Input: 200, Output: 20}}
	})
	h := startBot(t, nil, func(cfg *config.Config) {
		cfg.Models[config.DefaultModelName] = config.ModelConfig{Provider: "openai", BaseURL: of.URL, APIKey: key, Model: "gpt-test",
			MaxHistory: 50, Timeout: 10e9, Fallbacks: []string{"backup"}, Stream: true}
		cfg.Models["backup"] = config.ModelConfig{Provider: "anthropic", BaseURL: af.URL, APIKey: key, Model: "claude-test",
			MaxHistory: 50, Timeout: 10e9, Stream: true}
	})
	mention := "<@" + h.emu.BotUserID() + "> "
	for i, want := range []string{"from default", "from backup"} {
		if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, mention+want); err != nil {
			t.Fatal(err)
		}
		msgs, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2*(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if got := msgs[2*i+1].Content; !strings.HasPrefix(want, got) {
			t.Fatalf("reply %d %q, want %q", i, got, want)
		}
	}
	if n, m := len(of.Requests()), len(af.Requests()); n != 2 || m != 1 {
		t.Fatalf("requests: openai %d, anthropic %d", n, m)
	}
	// A stop waits for the turns to end (their entries and records
	// written); /usage then reads what the store holds.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	in, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "usage", discordtest.CommandOption{Name: "period", Value: "day"})
	if err != nil {
		t.Fatal(err)
	}
	content := adResponded(t, h, in).Content
	for _, want := range []string{"Your usage, last day: 330 tokens (300 in, 30 out, 50 cached) in 2 calls",
		"• backup: 220 tokens (200 in, 20 out, 0 cached) in 1 calls", "• default: 110 tokens (100 in, 10 out, 50 cached) in 1 calls"} {
		if !strings.Contains(content, want) {
			t.Fatalf("/usage lacks %q:\n%s", want, content)
		}
	}
	finishBot(t, h, h.general.ID)
}
