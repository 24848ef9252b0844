package bot

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/npmtest"
)

// fakeGemini is a loopback stand-in for the Gemini API that Gemini CLI
// calls (GOOGLE_GEMINI_BASE_URL): streamGenerateContent?alt=sse answers
// with text and, when asked to write, a write_file call; once the call's
// result comes back, a closing text. Other calls get a short text.
type fakeGemini struct {
	mu       sync.Mutex
	path     string // the file write_file is to create
	probe    string // the command run_shell_command is to run
	requests []string
	hold     chan struct{} // when set, a "slow" prompt's answer waits on it
}

func (f *fakeGemini) setPath(p string) {
	f.mu.Lock()
	f.path = p
	f.mu.Unlock()
}

func sse(w http.ResponseWriter, chunks ...map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
}

func textChunk(text string, final bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "index": 0}
	if final {
		cand["finishReason"] = "STOP"
	}
	return map[string]any{"candidates": []any{cand}, "usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}
}

func (f *fakeGemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	path, hold, probe := f.path, f.hold, f.probe
	f.mu.Unlock()
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             string          `json:"text"`
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	_ = json.Unmarshal(body, &req)
	lastText, answered, shell := "", false, false
	if n := len(req.Contents); n > 0 {
		for _, p := range req.Contents[n-1].Parts {
			lastText += p.Text
			if len(p.FunctionResponse) > 0 {
				answered = true
				shell = strings.Contains(string(p.FunctionResponse), "run_shell_command")
				f.mu.Lock()
				f.requests = append(f.requests, "functionResponse "+string(p.FunctionResponse))
				f.mu.Unlock()
			}
		}
	}
	switch {
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		switch {
		case answered && shell:
			sse(w, textChunk("The probe ran.", true))
		case answered:
			sse(w, textChunk("The file is written.", true))
		case strings.Contains(lastText, "run the probe"):
			call := map[string]any{"candidates": []any{map[string]any{"index": 0, "finishReason": "STOP", "content": map[string]any{"role": "model", "parts": []any{
				map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{"command": probe, "description": "probe the sandbox"}}},
			}}}}}
			sse(w, textChunk("Running the probe.", false), call)
		case strings.Contains(lastText, "write the notes file"):
			call := map[string]any{"candidates": []any{map[string]any{"index": 0, "finishReason": "STOP", "content": map[string]any{"role": "model", "parts": []any{
				map[string]any{"functionCall": map[string]any{"name": "write_file", "args": map[string]any{"file_path": path, "content": "notes from gemini\n"}}},
			}}}}}
			sse(w, textChunk("Sure, I will ", false), textChunk("write the notes file now.", false), call)
		case strings.Contains(lastText, "think slowly") && hold != nil:
			sse(w, textChunk("Thinking slowly", false))
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
			sse(w, textChunk(" and done.", true))
		default:
			sse(w, textChunk("Hello from the fake Gemini.", true))
		}
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(textChunk(`{"reasoning": "the user speaks next", "next_speaker": "user"}`, true))
	case strings.HasSuffix(r.URL.Path, ":countTokens"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"totalTokens": 10}`)
	default:
		http.NotFound(w, r)
	}
}

// TestE2EGeminiCLI is the Done-when test of issue 19: the real Gemini CLI
// (npm @google/gemini-cli, `--acp`) against a loopback fake of the Gemini
// API, with a throwaway HOME and every non-loopback connection blocked
// (the test fails if it tried one). /spawn agent:gemini -> a thread; a
// message -> Gemini streams an answer and asks to write a file; a
// stranger's click is refused; the binder approves; the file is in the
// session's workspace; /stop mid-turn cancels; transcript == display.
func TestE2EGeminiCLI(t *testing.T) {
	t.Parallel()
	gemini := npmtest.Bin(t, "gemini")
	fake := &fakeGemini{hold: make(chan struct{})}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(fake.hold) })
	home := t.TempDir()
	guard, attempts := npmtest.NetGuard(t, home)
	settings := `{"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}`
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	h, ws := acpBot(t, "gemini", func(h *harness, c *config.ACPAgentConfig) {
		c.Command, c.Args = gemini, []string{"--acp"}
		c.Env = map[string]string{"HOME": home, "GEMINI_API_KEY": "fake-key-not-checked", "GOOGLE_GEMINI_BASE_URL": srv.URL,
			"NODE_OPTIONS": guard["NODE_OPTIONS"], "NETGUARD_LOG": guard["NETGUARD_LOG"], "NO_BROWSER": "1"}
	})
	t.Cleanup(func() {
		if a := attempts(); len(a) > 0 {
			t.Errorf("Gemini CLI tried to reach outside: %q", a)
		}
		if t.Failed() {
			fake.mu.Lock()
			t.Logf("fake Gemini API requests: %q", fake.requests)
			fake.mu.Unlock()
		}
	})
	bob, err := h.emu.AddMember(h.guild.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	thread := acpSpawn(t, h, "gemini", "")
	acpMessage(t, h, thread.ID, "is bound to this thread")
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range h.emu.Messages(thread.ID) {
				t.Logf("thread: %q buttons %+v", m.Content, m.Buttons())
			}
		}
	})
	file := filepath.Join(ws, thread.ID, "notes.txt")
	fake.setPath(file)

	adSay(t, h, thread.ID, "Please write the notes file.")
	acpFirstAnswer(t, h, thread.ID, "Sure, I will write the notes file now.")
	perm := acpMessage(t, h, thread.ID, "asks permission")
	waitUntil(t, h, "the permission buttons", func() bool {
		m, _ := h.emu.Message(perm.ID)
		perm = m
		return len(m.Buttons()) > 0
	})
	allow := ""
	for _, b := range perm.Buttons() {
		if strings.HasPrefix(b.Label, "Allow") && allow == "" {
			allow = b.Label
		}
	}
	if allow == "" {
		t.Fatalf("no Allow button: %+v", perm.Buttons())
	}
	if r := acpClick(t, h, perm, bob.ID, allow); !r.Ephemeral || !strings.Contains(r.Content, "Only <@"+h.alice.ID+">") {
		t.Fatalf("a stranger's click answered %+v", r)
	}
	if r := acpClick(t, h, perm, h.alice.ID, allow); r.Type != 6 {
		t.Fatalf("the binder's click answered %+v", r)
	}
	acpMessage(t, h, thread.ID, "The file is written.")
	if b, err := os.ReadFile(file); err != nil || string(b) != "notes from gemini\n" {
		t.Fatalf("workspace file: %q %v", b, err)
	}

	// Gemini CLI's own shell tool runs inside the agent process: the
	// sandbox confines it (a write outside the workspace fails).
	here, _ := os.Getwd()
	outside, err := os.MkdirTemp(here, "gemini-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	fake.mu.Lock()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	fake.probe = "touch " + outside + "/escaped || echo write-outside-refused; echo probe-ran > probe.txt; " +
		`python3 -c 'import socket; socket.create_connection(("127.0.0.1", ` + strconv.Itoa(port) + `), 5)' || echo connect-refused`
	fake.mu.Unlock()
	adSay(t, h, thread.ID, "Please run the probe.")
	acpMessage(t, h, thread.ID, "Running the probe.")
	var shellPerm discordtest.Message
	waitUntil(t, h, "the shell tool's permission buttons", func() bool {
		for _, m := range h.emu.Messages(thread.ID) {
			if strings.Contains(m.Content, "asks permission") && m.ID != perm.ID && len(m.Buttons()) > 0 {
				shellPerm = m
				return true
			}
		}
		return false
	})
	acpClick(t, h, shellPerm, h.alice.ID, allow)
	acpMessage(t, h, thread.ID, "The probe ran.")
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("Gemini CLI's shell tool wrote outside the workspace")
	}
	if b, err := os.ReadFile(filepath.Join(ws, thread.ID, "probe.txt")); err != nil || string(b) != "probe-ran\n" {
		t.Errorf("the shell tool's file in the workspace: %q %v", b, err)
	}
	fake.mu.Lock()
	reqs := strings.Join(fake.requests, "\n")
	fake.mu.Unlock()
	for _, want := range []string{"write-outside-refused", "connect-refused"} {
		if !strings.Contains(reqs, want) {
			t.Errorf("the shell tool's result does not say %s: %s", want, reqs)
		}
	}

	adSay(t, h, thread.ID, "Now think slowly about it.")
	acpMessage(t, h, thread.ID, "Thinking slowly")
	if r := adResponded(t, h, adInvoke(t, h, thread.ID, "stop")); !strings.Contains(r.Content, "stop its turn") {
		t.Fatalf("/stop answered %q", r.Content)
	}
	acpMessage(t, h, thread.ID, "⏹️ Stopped.")
	finishBot(t, h, h.general.ID, thread.ID)
}
