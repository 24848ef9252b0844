package mcp

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/internal/npmtest"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/model/providers"
)

// The real filesystem server's tools reach both provider APIs with their
// names within the rules and their schemas unchanged.
func TestFilesystemToolsThroughProviders(t *testing.T) {
	t.Parallel()
	bin := npmtest.Bin(t, "mcp-server-filesystem")
	h := New(Options{Servers: []Server{{Name: "files", Command: bin, Args: []string{t.TempDir()}, Timeout: 20 * time.Second}},
		Agents: map[string][]string{"main": {"files"}}}, Deps{Log: zerolog.Nop()})
	runHub(t, h)
	tools := h.Tools(context.Background(), "main", alice)
	if len(tools) < 5 {
		t.Fatalf("filesystem tools = %v", names(tools))
	}
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}, Tools: tools}
	byName := map[string]model.Tool{}
	for _, tl := range tools {
		byName[tl.Name] = tl
	}
	// Round-trip through JSON, as the wire does.
	same := func(t *testing.T, name string, got any) {
		t.Helper()
		want, _ := json.Marshal(byName[name].Parameters)
		var w, g any
		_ = json.Unmarshal(want, &w)
		b, _ := json.Marshal(got)
		_ = json.Unmarshal(b, &g)
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s schema changed on the wire:\n got %s\nwant %s", name, b, want)
		}
	}

	oa := modeltest.NewOpenAIFake(t, "k")
	p, err := providers.New(model.Config{Provider: "openai", BaseURL: oa.URL, APIKey: "k", Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wire, _ := oa.Last()["tools"].([]any)
	if len(wire) != len(tools) {
		t.Fatalf("openai request has %d tools, want %d", len(wire), len(tools))
	}
	for _, w := range wire {
		fn, _ := w.(map[string]any)["function"].(map[string]any)
		name, _ := fn["name"].(string)
		if !ValidName(name) {
			t.Errorf("openai tool name %q", name)
		}
		same(t, name, fn["parameters"])
	}

	an := modeltest.NewAnthropicFake(t, "k")
	p, err = providers.New(model.Config{Provider: "anthropic", BaseURL: an.URL, APIKey: "k", Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wire, _ = an.Last()["tools"].([]any)
	if len(wire) != len(tools) {
		t.Fatalf("anthropic request has %d tools, want %d", len(wire), len(tools))
	}
	for _, w := range wire {
		tl, _ := w.(map[string]any)
		name, _ := tl["name"].(string)
		if !ValidName(name) {
			t.Errorf("anthropic tool name %q", name)
		}
		same(t, name, tl["input_schema"])
	}
}
