package session_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/modeltest"
	"github.com/agentbot/agentbot/store/memory"
)

// answering is a provider whose every answer names the model "backup" (a
// fallback answered) and reports u.
func answering(u model.Usage) *modeltest.Scripted {
	return &modeltest.Scripted{Fallback: func(model.Request) (model.Response, error) {
		return model.Response{Text: "answer", Model: "backup", Usage: u}, nil
	}}
}

func newMeter(st usage.Store, clk clock.Clock, b usage.Budget) *usage.Meter {
	return usage.New(usage.Options{Budget: b, Prices: map[string]usage.Price{"backup": {Input: 1, Output: 2}}},
		usage.Deps{Store: st, Clock: clk, Log: zerolog.Nop()})
}

func lastEntry(t *testing.T, f *fixture, key string) transcript.Entry {
	t.Helper()
	es := f.entries(key)
	if len(es) == 0 {
		t.Fatal("no entries")
	}
	return es[len(es)-1]
}

// TestReplyCarriesModelAndUsage: the reply entry names the model that
// answered and its tokens; the usage record has the model, agent, acting
// user, conversation, session, run, tokens and cost.
func TestReplyCarriesModelAndUsage(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	st := memory.New()
	f := newFixture(t, fixtureOptions{provider: answering(model.Usage{Input: 1000, Output: 200, Cached: 800}), clock: clk,
		usage: newMeter(st, clk, usage.Budget{}), store: st})
	f.say(ref("c1"), "hello")
	f.settle()
	e := lastEntry(t, f, keyOf("c1"))
	if e.Model != "backup" || e.Usage == nil || *e.Usage != (transcript.Usage{Input: 1000, Output: 200}) || e.Text != "answer" {
		t.Fatalf("reply entry %+v usage %+v", e, e.Usage)
	}
	rs, err := st.Usage(context.Background(), usage.Filter{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("records %+v %v", rs, err)
	}
	r := rs[0]
	want := usage.Record{At: clk.Now(), Model: "backup", Agent: "main", User: "u1", Conversation: "c1", SessionKey: keyOf("c1"),
		Run: r.Run, Input: 1000, Output: 200, Cached: 800, Cost: 0.0014}
	if !reflect.DeepEqual(r, want) || !strings.HasPrefix(r.Run, "turn:") {
		t.Fatalf("record\n%+v\nwant\n%+v", r, want)
	}
}

// TestFooterNamesTheModel: with footer on, the reply ends with the model
// that answered, and the transcript holds the text as displayed.
func TestFooterNamesTheModel(t *testing.T) {
	f := newFixture(t, fixtureOptions{provider: answering(model.Usage{Input: 1, Output: 1}), footer: true})
	f.say(ref("c1"), "hello")
	f.settle()
	e := lastEntry(t, f, keyOf("c1"))
	if e.Text != "answer\n\n— backup" {
		t.Fatalf("reply %q", e.Text)
	}
	sent := f.sender.sent[len(f.sender.sent)-1]
	if sent.Text != e.Text {
		t.Fatalf("displayed %q, transcript %q", sent.Text, e.Text)
	}
}

// TestBudgetRefusesAfterTheLimit: once the user's tokens in the window
// reach the budget, the next turn gets one notice and no model call, later
// ones silence; a new meter over the same store (a restart) still refuses;
// when the window has moved past the usage, turns are answered again.
func TestBudgetRefusesAfterTheLimit(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	st := memory.New()
	budget := usage.Budget{Tokens: 100, Per: time.Hour}
	p := answering(model.Usage{Input: 90, Output: 20})
	f := newFixture(t, fixtureOptions{provider: p, clock: clk, usage: newMeter(st, clk, budget), store: st})
	conv := ref("c1")
	f.say(conv, "one")
	f.settle()
	clk.Advance(time.Minute)
	f.say(conv, "two")
	f.settle()
	f.say(conv, "three")
	f.settle()
	if n := len(p.Requests()); n != 1 {
		t.Fatalf("model called %d times, want 1", n)
	}
	got := texts(f.entries(keyOf("c1")))
	if len(got) != 5 || got[2] != "user|two" || !strings.HasPrefix(got[3], "notice|⏳ your usage budget (100 tokens per 1h0m0s) is spent") || got[4] != "user|three" {
		t.Fatalf("transcript %q", got)
	}
	if !strings.Contains(got[3], "in 59m") {
		t.Fatalf("notice does not say when: %q", got[3])
	}
	// A restart: a new meter (and its notice memory) over the same store.
	f2 := newFixture(t, fixtureOptions{provider: p, clock: clk, usage: newMeter(st, clk, budget), store: f.store})
	f2.say(conv, "four")
	f2.settle()
	if n := len(p.Requests()); n != 1 {
		t.Fatalf("after a restart the model was called (%d calls)", n)
	}
	clk.Advance(time.Hour)
	f2.say(conv, "five")
	f2.settle()
	if n := len(p.Requests()); n != 2 {
		t.Fatalf("model called %d times after the window moved, want 2", n)
	}
}

// TestBudgetRefusesSubagent: a subagent whose spawner's budget is spent
// does not call the model; its run ends in error with the budget's notice
// as the reason.
func TestBudgetRefusesSubagent(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	st := memory.New()
	if err := st.AddUsage(context.Background(), usage.Record{At: clk.Now(), User: "u1", Input: 500}); err != nil {
		t.Fatal(err)
	}
	p := answering(model.Usage{Input: 1, Output: 1})
	f := newFixture(t, fixtureOptions{provider: p, clock: clk, usage: newMeter(st, clk, usage.Budget{Tokens: 100, Per: time.Hour}), store: st})
	if _, err := f.m.Spawn(context.Background(), spawnReq("research", false, ref("c1"))); err != nil {
		t.Fatal(err)
	}
	f.settle()
	in := f.onlySubagent()
	if len(p.Requests()) != 0 || in.Status != session.StatusError || !strings.Contains(in.Error, "usage budget") {
		t.Fatalf("model calls %d, subagent %s %q", len(p.Requests()), in.Status, in.Error)
	}
}

// countingUsage is the meter's store: it counts the writes of their own
// (AddUsage) that usage records took, and stores them in st.
type countingUsage struct {
	*memory.Store
	mu   sync.Mutex
	adds []int // records per AddUsage call
}

func (c *countingUsage) AddUsage(ctx context.Context, rs ...usage.Record) error {
	c.mu.Lock()
	c.adds = append(c.adds, len(rs))
	c.mu.Unlock()
	return c.Store.AddUsage(ctx, rs...)
}

func (c *countingUsage) writes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.adds)
}

// TestUsageRidesOnTheReplyEntry: the usage records of a turn's model calls
// (a tool round and the answer) are written with the reply entry, in its
// transaction, not by writes of their own; a turn with no reply entry (the
// model answered nothing) writes all its records in one write at its end.
func TestUsageRidesOnTheReplyEntry(t *testing.T) {
	for _, tc := range []struct {
		name       string
		final      string
		wantWrites []int
	}{
		{"reply", "answer", nil},
		{"no reply", "", []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
			st := memory.New()
			cu := &countingUsage{Store: st}
			p := &modeltest.Scripted{}
			p.Push(modeltest.Step{Resp: model.Response{Model: "backup", Usage: model.Usage{Input: 10, Output: 1},
				ToolCalls: []model.ToolCall{{ID: "x", Name: "no_such_tool", Arguments: "{}"}}}},
				modeltest.Step{Resp: model.Response{Model: "backup", Text: tc.final, Usage: model.Usage{Input: 20, Output: 2}}})
			f := newFixture(t, fixtureOptions{provider: p, clock: clk, usage: newMeter(cu, clk, usage.Budget{}), store: st})
			f.say(ref("c1"), "hello")
			f.settle()
			if got := cu.writes(); !slices.Equal(got, tc.wantWrites) {
				t.Fatalf("usage writes of their own %v, want %v", got, tc.wantWrites)
			}
			rs, err := st.Usage(context.Background(), usage.Filter{})
			if err != nil || len(rs) != 2 || rs[0].Input != 10 || rs[1].Input != 20 || rs[1].Cost != 0.000024 {
				t.Fatalf("records %+v %v", rs, err)
			}
			if tc.final != "" {
				if e := lastEntry(t, f, keyOf("c1")); e.Usage == nil || *e.Usage != (transcript.Usage{Input: 30, Output: 3}) || e.Calls != nil {
					t.Fatalf("reply entry %+v", e)
				}
			}
		})
	}
}
