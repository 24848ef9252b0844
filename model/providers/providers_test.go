package providers_test

import (
	"context"
	"testing"

	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/anthropic"
	"github.com/agentbot/agentbot/model/echo"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/model/openai"
	"github.com/agentbot/agentbot/model/providers"
)

func TestNew(t *testing.T) {
	oa := modeltest.NewOpenAIFake(t, "k1")
	an := modeltest.NewAnthropicFake(t, "k2")
	tests := []struct {
		cfg  model.Config
		want any
	}{
		{model.Config{}, &echo.Provider{}},
		{model.Config{Provider: "echo"}, &echo.Provider{}},
		{model.Config{Provider: "openai", BaseURL: oa.URL, APIKey: "k1", Model: "m"}, &openai.Provider{}},
		{model.Config{Provider: "anthropic", BaseURL: an.URL, APIKey: "k2", Model: "m"}, &anthropic.Provider{}},
	}
	for _, tt := range tests {
		p, err := providers.New(tt.cfg, nil)
		if err != nil {
			t.Fatalf("%+v: %v", tt.cfg.Provider, err)
		}
		switch tt.want.(type) {
		case *echo.Provider:
			_, ok := p.(*echo.Provider)
			if !ok {
				t.Fatalf("%q: got %T", tt.cfg.Provider, p)
			}
		case *openai.Provider:
			if _, ok := p.(*openai.Provider); !ok {
				t.Fatalf("got %T", p)
			}
		case *anthropic.Provider:
			if _, ok := p.(*anthropic.Provider); !ok {
				t.Fatalf("got %T", p)
			}
		}
		resp, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		if err != nil || resp.Text == "" {
			t.Fatalf("%q: %v %+v", tt.cfg.Provider, err, resp)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, cfg := range []model.Config{
		{Provider: "gemini"},
		{Provider: "openai"},
		{Provider: "anthropic", Model: "m"},
	} {
		if _, err := providers.New(cfg, nil); err == nil {
			t.Errorf("%+v: want error", cfg)
		}
	}
}
