package modeltest

import (
	"context"
	"errors"
	"sync"

	"github.com/agentbot/agentbot/model"
)

// Step is one scripted answer: a response or an error.
type Step struct {
	Resp model.Response
	Err  error
}

// Scripted is a model.Provider for tests of code that calls models: it
// records every request (deep-copied) and answers with the queued steps in
// order; when the queue is empty it answers with Fallback, or, if Fallback
// is nil, with an error.
type Scripted struct {
	mu       sync.Mutex
	steps    []Step
	requests []model.Request
	// Fallback answers requests once the queue is empty.
	Fallback func(model.Request) (model.Response, error)
}

// ErrScriptExhausted is returned when no step is queued and Fallback is nil.
var ErrScriptExhausted = errors.New("modeltest: no scripted response left")

// Push queues steps.
func (s *Scripted) Push(steps ...Step) {
	s.mu.Lock()
	s.steps = append(s.steps, steps...)
	s.mu.Unlock()
}

// Requests returns the requests received so far.
func (s *Scripted) Requests() []model.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]model.Request(nil), s.requests...)
}

// Complete implements model.Provider.
func (s *Scripted) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, model.NewError("scripted", 0, err)
	}
	s.mu.Lock()
	s.requests = append(s.requests, copyRequest(req))
	var step *Step
	if len(s.steps) > 0 {
		step = &s.steps[0]
		s.steps = s.steps[1:]
	}
	fb := s.Fallback
	s.mu.Unlock()
	switch {
	case step != nil:
		return step.Resp, step.Err
	case fb != nil:
		return fb(req)
	}
	return model.Response{}, ErrScriptExhausted
}

func copyRequest(r model.Request) model.Request {
	msgs := make([]model.Message, len(r.Messages))
	for i, m := range r.Messages {
		m.ToolCalls = append([]model.ToolCall(nil), m.ToolCalls...)
		msgs[i] = m
	}
	r.Messages = msgs
	r.Tools = append([]model.Tool(nil), r.Tools...)
	return r
}
