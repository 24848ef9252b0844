package modeltest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
)

func TestScripted(t *testing.T) {
	var s modeltest.Scripted
	s.Push(modeltest.Step{Resp: model.Response{Text: "one"}}, modeltest.Step{Err: &model.Error{Kind: model.KindRateLimit}})
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}
	if r, err := s.Complete(context.Background(), req); err != nil || r.Text != "one" {
		t.Fatalf("%v %v", r, err)
	}
	if _, err := s.Complete(context.Background(), req); !errors.Is(err, model.ErrRateLimited) {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.Complete(context.Background(), req); !errors.Is(err, modeltest.ErrScriptExhausted) {
		t.Fatalf("err = %v", err)
	}
	if n := len(s.Requests()); n != 3 {
		t.Fatalf("requests = %d", n)
	}
}
