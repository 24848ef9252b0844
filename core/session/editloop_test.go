package session_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/model"
)

// stepper answers model call n with step(n); every call is announced on
// entered first.
type stepper struct {
	mu      sync.Mutex
	n       int
	entered chan int
	step    func(ctx context.Context, n int) (model.Response, error)
}

func (s *stepper) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	s.entered <- n
	return s.step(ctx, n)
}

func (s *stepper) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *stepper) waitEntered(t *testing.T) int {
	t.Helper()
	select {
	case n := <-s.entered:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("the model was not called")
	}
	return 0
}

// fakeBudget admits left more turns, then refuses.
type fakeBudget struct {
	mu   sync.Mutex
	left int
	took []string
}

func (b *fakeBudget) Take(userID, _ string) authz.Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.took = append(b.took, userID)
	if b.left <= 0 {
		return authz.Decision{Scope: "user"}
	}
	b.left--
	return authz.Decision{OK: true}
}

// TestEditLoopBoundedModelCalls (issue 26.6, invariant 20): editing a
// message while its turn's model call runs cancels the call and runs it
// again, at most session.MaxEditReruns times and each re-run charged to
// the author's turn budget; past that an edit only updates the history.
// The old code ran the model once per edit, uncharged.
func TestEditLoopBoundedModelCalls(t *testing.T) {
	for _, tc := range []struct {
		name      string
		budget    *fakeBudget
		wantCalls int
	}{
		{"cap", nil, 1 + session.MaxEditReruns},
		{"budget", &fakeBudget{left: 1}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			p := &stepper{entered: make(chan int, 64), step: func(ctx context.Context, n int) (model.Response, error) {
				select {
				case <-release:
					return model.Response{Text: fmt.Sprintf("answer %d", n)}, nil
				case <-ctx.Done():
					return model.Response{}, model.NewError("test", 0, ctx.Err())
				}
			}}
			o := fixtureOptions{provider: p}
			if tc.budget != nil {
				o.budget = tc.budget
			}
			f := newFixture(t, o)
			id := f.say(ref("c1"), "question")
			p.waitEntered(t)
			for i := range 10 {
				if !f.m.MessageEdited(id) {
					t.Fatalf("edit %d: the turn was not found", i)
				}
				if i+1 < tc.wantCalls {
					p.waitEntered(t) // the re-run's model call
				}
			}
			close(release)
			f.settle()
			if got := p.calls(); got != tc.wantCalls {
				t.Fatalf("10 edits of one message caused %d model calls, want %d", got, tc.wantCalls)
			}
			if tc.budget != nil && (len(tc.budget.took) < 2 || tc.budget.left != 0) {
				t.Fatalf("budget asked %d times, %d left: the re-run was not charged", len(tc.budget.took), tc.budget.left)
			}
			if sent := f.sender.to("c1"); len(sent) != 1 {
				t.Fatalf("c1 shows %d replies, want 1", len(sent))
			}
		})
	}
}

// TestEditAfterSideEffectingToolDoesNotRerun (issue 26.6): once a turn ran
// a tool with effects outside it (send_message), an edit of its message no
// longer cancels and re-runs it: the re-run would send again.
func TestEditAfterSideEffectingToolDoesNotRerun(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	p := &stepper{entered: make(chan int, 64), step: func(ctx context.Context, n int) (model.Response, error) {
		if n%2 == 1 { // each attempt's first call sends a message
			return model.Response{ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("call-%d", n), Name: "send_message", Arguments: `{"to":"channel:c2","text":"hello c2"}`}}}, nil
		}
		select {
		case <-release:
			return model.Response{Text: "sent"}, nil
		case <-ctx.Done():
			return model.Response{}, model.NewError("test", 0, ctx.Err())
		}
	}}
	f := newFixture(t, fixtureOptions{provider: p})
	id := f.say(ref("c1"), "tell c2 hello")
	p.waitEntered(t)
	p.waitEntered(t) // the round after the tool call
	f.m.MessageEdited(id)
	close(release)
	f.settle()
	if got := len(f.sender.to("c2")); got != 1 {
		t.Fatalf("c2 got %d messages, want 1: the edit re-ran the turn and its send_message", got)
	}
	if got := p.calls(); got != 2 {
		t.Fatalf("%d model calls, want 2", got)
	}
}

// TestStreamedEditAfterSideEffectingToolDoesNotRerun: the same for a
// streamed turn whose first round (no text) calls send_message.
func TestStreamedEditAfterSideEffectingToolDoesNotRerun(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 4), make(chan struct{})
	send := func(id string) func(context.Context, func(string)) (model.Response, error) {
		return func(context.Context, func(string)) (model.Response, error) {
			return model.Response{ToolCalls: []model.ToolCall{{ID: id, Name: "send_message", Arguments: `{"to":"channel:c2","text":"hello c2"}`}}}, nil
		}
	}
	wait := func(ctx context.Context, onText func(string)) (model.Response, error) {
		entered <- struct{}{}
		select {
		case <-release:
			onText("sent")
			return model.Response{Text: "sent"}, nil
		case <-ctx.Done():
			return model.Response{}, model.NewError("test", 0, ctx.Err())
		}
	}
	p := &roundStreamer{rounds: []func(context.Context, func(string)) (model.Response, error){send("a"), wait, send("b"), wait}}
	f := newFixture(t, fixtureOptions{provider: p, stream: true, live: true, instantPacing: true})
	id := f.say(ref("c1"), "tell c2 hello")
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the second round was not reached")
	}
	f.m.MessageEdited(id)
	close(release)
	f.settle()
	if got := len(f.sender.to("c2")); got != 1 {
		t.Fatalf("c2 got %d messages, want 1: the edit re-ran the streamed turn and its send_message", got)
	}
	if got := p.called(); got != 2 {
		t.Fatalf("%d model calls, want 2", got)
	}
}
