package bot

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
)

// Feels-alive tests (issue 14): what a user sees while the bot works.

// aliveGate is a model that holds every call until released (or its
// context ends), so a test can look at the chat while the model "thinks".
type aliveGate struct {
	entered   chan model.Request
	release   chan struct{}
	cancelled chan struct{} // receives when a held call's context ended
}

func newAliveGate() *aliveGate {
	return &aliveGate{entered: make(chan model.Request, 16), release: make(chan struct{}, 16), cancelled: make(chan struct{}, 16)}
}

func (g *aliveGate) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	g.entered <- req
	select {
	case <-g.release:
	case <-ctx.Done():
		g.cancelled <- struct{}{}
		return model.Response{}, model.NewError("gate", 0, ctx.Err())
	}
	last := req.Messages[len(req.Messages)-1].Text
	return model.Response{Text: "answer to " + last}, nil
}

func (g *aliveGate) waitEntered(t *testing.T) model.Request {
	t.Helper()
	select {
	case r := <-g.entered:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the model was not called")
	}
	return model.Request{}
}

// aliveAfter is the typing indicator's clock: a wait ends when the test fires.
type aliveAfter struct {
	mu    sync.Mutex
	c     chan time.Time
	waits []time.Duration
}

func (a *aliveAfter) after(d time.Duration) <-chan time.Time {
	a.mu.Lock()
	a.waits = append(a.waits, d)
	a.mu.Unlock()
	return a.c
}

func (a *aliveAfter) fire(t *testing.T) {
	t.Helper()
	select {
	case a.c <- time.Time{}:
	case <-time.After(10 * time.Second):
		t.Fatal("no typing indicator was waiting")
	}
}

func startAliveBot(t *testing.T, p model.Provider) (*harness, *aliveAfter) {
	t.Helper()
	ta := &aliveAfter{c: make(chan time.Time)}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Provider: p, TypingAfter: ta.after})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return h, ta
}

const typingRoute = "/channels/{channel_id}/typing"

// typingIn returns how many typing calls the bot made in channel, and how many got a 429.
func typingIn(h *harness, channel string) (n, limited int) {
	for _, r := range h.emu.RequestsTo("POST", typingRoute) {
		if r.Path == "/channels/"+channel+"/typing" {
			n++
			if r.Status == 429 {
				limited++
			}
		}
	}
	return n, limited
}

// TestE2ETypingWhileTurnWorks: a turn shows the typing indicator in its
// channel while the model works, renews it, and stops before the reply;
// no typing call follows the reply and none is rate limited.
func TestE2ETypingWhileTurnWorks(t *testing.T) {
	t.Parallel()
	g := newAliveGate()
	h, ta := startAliveBot(t, g)
	adSay(t, h, h.general.ID, adMention(h)+"think hard")
	g.waitEntered(t)
	ta.fire(t) // the grace passed
	waitUntil(t, h, "a typing call in #general", func() bool { n, _ := typingIn(h, h.general.ID); return n == 1 })
	ta.fire(t) // 8 s later: renewed
	waitUntil(t, h, "a renewed typing call", func() bool { n, _ := typingIn(h, h.general.ID); return n == 2 })
	g.release <- struct{}{}
	waitUntil(t, h, "the reply", func() bool { return countContaining(h.emu.Messages(h.general.ID), "answer to") == 1 })
	finishBot(t, h, h.general.ID)
	if n, limited := typingIn(h, h.general.ID); n != 2 || limited != 0 {
		t.Fatalf("typing calls %d (429: %d), want 2 and none limited", n, limited)
	}
	// Order: every typing call before the reply's send.
	lastTyping, reply := -1, -1
	for i, r := range h.emu.Requests() {
		switch {
		case r.Route == typingRoute:
			lastTyping = i
		case r.Method == "POST" && r.Route == "/channels/{channel_id}/messages" && strings.Contains(string(r.Body), "answer to"):
			reply = i
		}
	}
	if reply < 0 || lastTyping > reply {
		t.Fatalf("typing call %d after the reply %d", lastTyping, reply)
	}
}

// TestE2ETypingInBoundSubagentThread: a bound subagent's indicator shows in
// its thread (where its result appears), not in the channel that spawned it.
func TestE2ETypingInBoundSubagentThread(t *testing.T) {
	t.Parallel()
	g := newAliveGate()
	h, ta := startAliveBot(t, g)
	in := adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "research"), adOpt("label", "scout"), adOpt("thread", true))
	if r := adResponded(t, h, in); !strings.Contains(r.Content, "Started subagent") {
		t.Fatalf("/spawn answered %q", r.Content)
	}
	g.waitEntered(t)
	var thread string
	waitUntil(t, h, "the thread", func() bool {
		ths := h.emu.Threads(h.general.ID)
		if len(ths) == 1 {
			thread = ths[0].ID
		}
		return thread != ""
	})
	ta.fire(t)
	waitUntil(t, h, "typing in the thread", func() bool { n, _ := typingIn(h, thread); return n == 1 })
	g.release <- struct{}{}
	waitUntil(t, h, "the result in the thread", func() bool { return countContaining(h.emu.Messages(thread), "answer to") == 1 })
	finishBot(t, h, h.general.ID, thread)
	if n, _ := typingIn(h, h.general.ID); n != 0 {
		t.Fatalf("%d typing calls in #general, want none (the answer appears in the thread)", n)
	}
}

// TestE2EStopEndsRunningTurn: /stop mid-turn cancels the model call (its
// context ends), answers ephemerally, posts nothing in the channel, and the
// transcript keeps the user's message (Rule 1 holds). Someone else's /stop
// is refused and the turn goes on.
func TestE2EStopEndsRunningTurn(t *testing.T) {
	t.Parallel()
	g := newAliveGate()
	h, _ := startAliveBot(t, g)
	// Members are not operators (no Manage Server); alice runs her own turn.
	if err := h.emu.SetRolePermissions(h.guild.ID, h.guild.ID, discordtest.DefaultEveryone); err != nil {
		t.Fatal(err)
	}
	bob, err := h.emu.AddMember(h.guild.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	adSay(t, h, h.general.ID, adMention(h)+"write an essay")
	g.waitEntered(t)

	in, err := h.emu.InvokeCommand(h.general.ID, bob.ID, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if r := adResponded(t, h, in); !r.Ephemeral || !strings.Contains(r.Content, "needs an operator") {
		t.Fatalf("bob's /stop answered %+v, want an ephemeral refusal", r)
	}
	select {
	case <-g.cancelled:
		t.Fatal("a refused /stop cancelled the model call")
	default:
	}

	r := adResponded(t, h, adInvoke(t, h, h.general.ID, "stop"))
	if !r.Ephemeral || !strings.Contains(r.Content, "Stopped this conversation's turn") {
		t.Fatalf("/stop answered %+v", r)
	}
	select {
	case <-g.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the model call was not cancelled")
	}
	if r := adResponded(t, h, adInvoke(t, h, h.general.ID, "stop")); !strings.Contains(r.Content, "Nothing is running in this conversation") {
		t.Fatalf("second /stop answered %q", r.Content)
	}
	// The next message is answered: the stop ended one turn, not the conversation.
	adSay(t, h, h.general.ID, adMention(h)+"short one")
	g.waitEntered(t)
	g.release <- struct{}{}
	waitUntil(t, h, "the next reply", func() bool { return countContaining(h.emu.Messages(h.general.ID), "answer to") == 1 })
	finishBot(t, h, h.general.ID)
	for _, m := range h.emu.Messages(h.general.ID) {
		if strings.Contains(m.Content, "essay") && m.Author.ID == h.emu.BotUserID() {
			t.Fatalf("the stopped turn posted %q", m.Content)
		}
	}
}

// TestE2EStopNamedSubagent: /stop target:<label> ends a subagent's run; its
// completion says it was stopped.
func TestE2EStopNamedSubagent(t *testing.T) {
	t.Parallel()
	g := newAliveGate()
	h, _ := startAliveBot(t, g)
	in := adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "research"), adOpt("label", "scout"), adOpt("thread", false))
	if r := adResponded(t, h, in); !strings.Contains(r.Content, "Started subagent") {
		t.Fatalf("/spawn answered %q", r.Content)
	}
	g.waitEntered(t)
	r := adResponded(t, h, adInvoke(t, h, h.general.ID, "stop", adOpt("target", "scout")))
	if !r.Ephemeral || !strings.Contains(r.Content, "Stopped **scout**") {
		t.Fatalf("/stop target:scout answered %+v", r)
	}
	waitUntil(t, h, "the stopped completion", func() bool {
		return countContaining(h.emu.Messages(h.general.ID), "scout was stopped") == 1
	})
	finishBot(t, h, h.general.ID)
}

// startAttachBot runs the bot on an OpenAI-compatible fake with vision as given.
func startAttachBot(t *testing.T, vision bool) (*harness, *modeltest.OpenAIFake) {
	t.Helper()
	f := modeltest.NewOpenAIFake(t, "k")
	h := startBot(t, nil, func(cfg *config.Config) {
		mc := cfg.Models[config.DefaultModelName]
		mc.Provider, mc.BaseURL, mc.APIKey, mc.Model, mc.Vision = "openai", f.URL, "k", "m", vision
		cfg.Models[config.DefaultModelName] = mc
	})
	return h, f
}

// lastUserContent is the last user message's content in the fake's last request.
func lastUserContent(t *testing.T, f *modeltest.OpenAIFake) any {
	t.Helper()
	var content any
	for _, m := range f.Last()["messages"].([]any) {
		if mm := m.(map[string]any); mm["role"] == "user" {
			content = mm["content"]
		}
	}
	return content
}

var (
	catPNG   = discordtest.File{Name: "cat.png", ContentType: "image/png", Data: []byte("\x89PNG fake picture")}
	notesTxt = discordtest.File{Name: "notes.txt", ContentType: "text/plain; charset=utf-8", Data: []byte("line one of the notes")}
)

// TestE2EImageReachesVisionModel: with vision: true a user's picture reaches
// the model request as an image_url part, a text file is inlined, and the
// transcript's user entry records both attachments (inspect -json shape).
func TestE2EImageReachesVisionModel(t *testing.T) {
	t.Parallel()
	h, f := startAttachBot(t, true)
	msg, err := h.emu.UserSayFiles(h.general.ID, h.alice.ID, adMention(h)+"what is this?", catPNG, notesTxt)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the reply", func() bool { return countContaining(h.emu.Messages(h.general.ID), "ok") == 1 })
	parts, ok := lastUserContent(t, f).([]any)
	if !ok || len(parts) != 2 {
		t.Fatalf("user content %v, want text and one image part", lastUserContent(t, f))
	}
	text, _ := parts[0].(map[string]any)["text"].(string)
	if !strings.Contains(text, "what is this?") || !strings.Contains(text, "line one of the notes") || !strings.Contains(text, "cat.png (image/png, 17 bytes): attached") {
		t.Fatalf("text part %q", text)
	}
	img := parts[1].(map[string]any)
	url, _ := img["image_url"].(map[string]any)["url"].(string)
	if img["type"] != "image_url" || url != "data:image/png;base64,"+base64.StdEncoding.EncodeToString(catPNG.Data) {
		t.Fatalf("image part %v", img)
	}
	st := finishBot(t, h, h.general.ID)
	es, err := st.Range(t.Context(), adSessionKey(h.general.ID), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []transcript.Attachment{
		{Filename: "cat.png", ContentType: "image/png", Size: int64(len(catPNG.Data)), URL: msg.Attachments[0].URL},
		{Filename: "notes.txt", ContentType: "text/plain; charset=utf-8", Size: int64(len(notesTxt.Data)), URL: msg.Attachments[1].URL},
	}
	if es[0].Role != transcript.RoleUser || !slices.Equal(es[0].Attachments, want) {
		t.Fatalf("user entry attachments %+v, want %+v", es[0].Attachments, want)
	}
	if n := h.emu.AttachmentFetches(); len(n) != 2 {
		t.Fatalf("fetches %v, want each attachment once", n)
	}
}

// TestE2EImageNamedWithoutVision: with vision: false the picture is named in
// the text (never fetched) and a text file is still inlined.
func TestE2EImageNamedWithoutVision(t *testing.T) {
	t.Parallel()
	h, f := startAttachBot(t, false)
	if _, err := h.emu.UserSayFiles(h.general.ID, h.alice.ID, adMention(h)+"read these", catPNG, notesTxt); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the reply", func() bool { return countContaining(h.emu.Messages(h.general.ID), "ok") == 1 })
	text, ok := lastUserContent(t, f).(string)
	if !ok || !strings.Contains(text, "line one of the notes") || !strings.Contains(text, "cat.png (image/png, 17 bytes): this model does not see images") {
		t.Fatalf("user content %v", lastUserContent(t, f))
	}
	finishBot(t, h, h.general.ID)
	for p := range h.emu.AttachmentFetches() {
		if strings.HasSuffix(p, "cat.png") {
			t.Fatal("the image was fetched for a model without vision")
		}
	}
}

// TestE2ESpawnSlowThreadDeferred (invariant 15): thread creation taking 4 s
// (past Discord's 3 s) still answers /spawn: deferred at once, then the
// reply; the emulator refuses any callback after 3 s (10062).
func TestE2ESpawnSlowThreadDeferred(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, nil)
	h.emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/*/threads", Latency: 4 * time.Second})
	in := adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "slow"), adOpt("label", "slow"), adOpt("thread", true))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got, err := h.emu.WaitResponses(ctx, in.ID, 2)
	if err != nil {
		t.Fatalf("responses: %v", err)
	}
	if r := got.Responses[0]; r.Kind != "callback" || r.Type != 5 {
		t.Fatalf("first response %+v, want a deferral", r)
	}
	if r := got.Responses[1]; !strings.Contains(r.Content, "Started subagent") {
		t.Fatalf("second response %+v, want the reply", r)
	}
	waitUntil(t, h, "the thread's intro", func() bool {
		ths := h.emu.Threads(h.general.ID)
		return len(ths) == 1 && countContaining(h.emu.Messages(ths[0].ID), "session active") == 1
	})
	finishBot(t, h, h.general.ID, h.emu.Threads(h.general.ID)[0].ID)
	for _, r := range h.emu.Requests() {
		if r.Code == 10062 {
			t.Fatalf("an interaction callback came too late: %s %s", r.Method, r.Path)
		}
	}
}

// TestE2ECronRunSlowModelAnswered (invariant 15): /cron run of an in-chat
// job whose model takes longer than 3 s is answered in time (at once or
// deferred), and the job's answer still arrives in the chat.
func TestE2ECronRunSlowModelAnswered(t *testing.T) {
	t.Parallel()
	g := newAliveGate()
	h := schedStart(t, g, nil)
	h.cron(t, "add", opt("schedule", "every 1h"), opt("prompt", "hourly check"))
	j := h.onlyJob(t)
	in, err := h.emu.InvokeCommand(h.general.ID, h.alice.ID, "cron", discordtest.CommandOption{Name: "run", Value: []discordtest.CommandOption{opt("id", j.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	// The model holds; the interaction must be answered anyway, past 3 s.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got, err := h.emu.WaitResponses(ctx, in.ID, 1)
	if err != nil {
		t.Fatalf("no response to /cron run while the model works: %v", err)
	}
	if r := got.Responses[0]; r.Kind != "callback" {
		t.Fatalf("first response %+v, want a callback", r)
	}
	g.release <- struct{}{}
	waitUntil(t, h.harness, "the job's answer", func() bool {
		return countContaining(h.emu.Messages(h.general.ID), "answer to") == 1
	})
	if _, _, err := h.emu.WaitAnswer(ctx, in.ID); err != nil {
		t.Fatalf("/cron run never answered: %v", err)
	}
	finishBot(t, h.harness, h.general.ID)
	for _, r := range h.emu.Requests() {
		if r.Code == 10062 {
			t.Fatalf("an interaction callback came too late: %s %s", r.Method, r.Path)
		}
	}
}
