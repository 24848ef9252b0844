package bot

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/bolt"
)

// slowModel is an OpenAI-compatible endpoint whose answers wait while
// hold is set: a turn can be caught inside its model call.
type slowModel struct {
	mu      sync.Mutex
	hold    chan struct{} // nil: answer at once
	entered chan struct{}
}

func (m *slowModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if hold != nil {
		select {
		case m.entered <- struct{}{}:
		default:
		}
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"the digest"},"finish_reason":"stop"}]}`)
}

// lockedBuffer collects a child's stderr; the test may read it meanwhile.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCrashDuringJobRunEndsVisibly runs the real binary: an in-chat job's
// turn is caught in its model call (its trigger line displayed), the bot is
// killed with SIGKILL and restarted. The run must not stay `running` with
// a trigger and no reply: it failed, the chat got a notice, it counts as a
// failure, and the transcript matches the chat (Rule 1).
func TestCrashDuringJobRunEndsVisibly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	dir := t.TempDir()
	bin := buildBot(t, dir)
	emu := discordtest.NewTest(t, discordtest.Options{})
	g := emu.AddGuild("crash")
	ch, err := emu.AddTextChannel(g.ID, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := emu.AddMember(g.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	mdl := &slowModel{hold: make(chan struct{}), entered: make(chan struct{}, 1)}
	srv := httptest.NewServer(mdl)
	defer srv.Close()
	defer func() { // let a held request end (the killed process's one is gone)
		mdl.mu.Lock()
		if mdl.hold != nil {
			close(mdl.hold)
			mdl.hold = nil
		}
		mdl.mu.Unlock()
	}()

	storePath := filepath.Join(dir, "bot.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`discord:
  token: %q
  apiURL: %q
store: {path: %q}
http: {listen: ""}
log: {level: warn, format: json}
agents:
  - {id: main, model: slow}
models:
  slow: {provider: openai, baseURL: %q, model: m, maxToolSteps: 0}
scheduler: {enabled: true, timezone: UTC}
`, emu.Token(), emu.URL(), storePath, srv.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The job: in-chat, due two seconds after the bot starts.
	at := time.Now().Add(3 * time.Second).UTC().Truncate(time.Second)
	var jobID string
	seedStore(t, storePath, func(st *bolt.Store) {
		s := scheduler.New(scheduler.Options{Settings: scheduler.Settings{Enabled: true, Location: time.UTC}}, scheduler.Deps{Store: st, Log: zerolog.Nop()})
		j, err := s.Add(context.Background(), scheduler.AddRequest{Name: "digest", Schedule: "at " + at.Format(time.RFC3339), Prompt: "post the digest",
			Target: "main", CreatedBy: alice.ID, CreatedIn: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: ch.ID}})
		if err != nil {
			t.Fatal(err)
		}
		jobID = j.ID
	})

	var logs lockedBuffer
	start := func() *exec.Cmd { return runBot(t, bin, cfgPath, &logs) }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := start()
	// Caught in the model call, after the trigger line was displayed.
	select {
	case <-mdl.entered:
	case <-ctx.Done():
		t.Fatalf("the job's turn never called the model\nlogs:\n%s", logs.String())
	}
	if err := emu.Wait(ctx, func() bool { return countContaining(emu.Messages(ch.ID), "⏰ digest") == 1 }); err != nil {
		t.Fatalf("no trigger line: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	mdl.mu.Lock()
	close(mdl.hold)
	mdl.hold = nil
	mdl.mu.Unlock()

	identifies := emu.GatewayStats().Identifies
	cmd = start()
	if err := emu.Wait(ctx, func() bool { return countContaining(emu.Messages(ch.ID), "was interrupted") == 1 }); err != nil {
		t.Fatalf("no notice of the interrupted run after the restart: %v\nmessages: %v\nlogs:\n%s", err, emu.Messages(ch.ID), logs.String())
	}
	if err := emu.Wait(ctx, func() bool { return emu.GatewayStats().Identifies > identifies }); err != nil {
		t.Fatal(err)
	}
	settle(ctx, t, emu)
	stopBot(t, cmd, &logs)
	st := openStopped(t, storePath)
	runs, err := st.Runs(ctx, jobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	r := runs[0]
	if r.Status != scheduler.StatusError || r.Summary != scheduler.SummaryInterrupted || r.FinishedAt.IsZero() || len(r.Delivery.MessageIDs) != 2 {
		t.Fatalf("the interrupted run: %+v", r)
	}
	j, _, err := st.Job(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State.ConsecutiveFailures != 1 || j.State.LastStatus != scheduler.StatusError {
		t.Fatalf("job state %+v", j.State)
	}
	// The chat shows the trigger and the notice, once each, and nothing else from the bot.
	if n := len(emu.Messages(ch.ID)); n != 2 {
		t.Fatalf("%d messages: %v", n, emu.Messages(ch.ID))
	}
	problems, err := rule1.Check(ctx, rule1.Emulator(emu), st, []string{ch.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
