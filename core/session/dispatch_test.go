package session_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// fakeExternal is an ACP agent's side as strict as the real one: it takes a
// message by appending its user entry (delivery id "in:<id>") to the bound
// session's transcript, and records what it was handed.
type fakeExternal struct {
	tr interface {
		Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, error)
	}
	mu  sync.Mutex
	got []string // message ids
	rec []binding.Record
}

func (f *fakeExternal) HandleMessage(ctx context.Context, rec binding.Record, msg session.Message) error {
	if rec.TargetKind != binding.KindACP {
		return &wrongKindError{rec.TargetKind}
	}
	if _, err := f.tr.Append(ctx, rec.TargetSessionKey, transcript.Entry{Role: transcript.RoleUser, Author: msg.AuthorName, Text: msg.Text,
		MessageIDs: []string{msg.MessageID}, Source: transcript.SourceUser, DeliveryID: "in:" + msg.MessageID}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, msg.MessageID)
	f.rec = append(f.rec, rec)
	return nil
}

func (f *fakeExternal) taken() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

type wrongKindError struct{ kind binding.TargetKind }

func (e *wrongKindError) Error() string { return "external handed a " + string(e.kind) + " binding" }

// holders lists the sessions (of keys) whose transcripts hold a user entry
// of message id.
func holders(f *fixture, id string, keys ...string) []string {
	var out []string
	for _, k := range keys {
		for _, e := range f.entries(k) {
			if e.Source == transcript.SourceUser && slices.Contains(e.MessageIDs, id) {
				out = append(out, k)
			}
		}
	}
	return out
}

// TestDispatchResolvesOnceAndTakesOnce: a conversation's message is
// resolved to its target with one route lookup (one binding lookup) and
// handed on with what was resolved, to an ACP agent's session or to a
// session of the manager; a message a transcript already holds is not taken
// again, whichever side took it and wherever the conversation routes now.
func TestDispatchResolvesOnceAndTakesOnce(t *testing.T) {
	const acpKey, subKey = "acp:script:t1", "agent:main:subagent:moved"
	msg := func(id, text string) session.Message {
		return session.Message{Conversation: threadRef("t1", "c1"), MessageID: id, AuthorID: "u1", AuthorName: "alice", Text: text}
	}
	for _, tc := range []struct {
		name string
		// steps run in order: "acp" binds t1 to the ACP session, "focus"
		// moves it onto a subagent session, a message id hands that
		// message to the manager.
		steps []string
		// want: per message id the one session that holds it; agent: the
		// messages the ACP side took, in order.
		want  map[string]string
		agent []string
	}{
		{"to the agent", []string{"acp", "301"}, map[string]string{"301": acpKey}, []string{"301"}},
		{"replayed to the agent", []string{"acp", "301", "301"}, map[string]string{"301": acpKey}, []string{"301"}},
		{"replayed after a focus", []string{"acp", "301", "focus", "301", "302"}, map[string]string{"301": acpKey, "302": subKey}, []string{"301"}},
		{"to the session, then the agent", []string{"301", "acp", "301", "302"}, map[string]string{"301": keyOf("t1"), "302": acpKey}, []string{"302"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lookups atomic.Int64
			ext := &fakeExternal{}
			f := newFixture(t, fixtureOptions{external: ext, lookups: &lookups})
			ext.tr = f.tr
			ctx := context.Background()
			var acp binding.Record
			handed := int64(0)
			for _, step := range tc.steps {
				switch step {
				case "acp":
					var err error
					acp, err = f.bindings.Bind(ctx, binding.BindInput{TargetSessionKey: acpKey, TargetKind: binding.KindACP,
						Conversation: threadRef("t1", "c1"), AgentID: "script", BoundBy: "u1"})
					if err != nil {
						t.Fatal(err)
					}
				case "focus":
					if _, err := f.bindings.Unbind(ctx, binding.UnbindInput{ID: acp.ID, Reason: binding.ReasonRebound}); err != nil {
						t.Fatal(err)
					}
					focus(t, f, subKey, "t1")
				default:
					f.settle() // the lookups of earlier turns' replies are the send owner's own
					before := lookups.Load()
					if err := f.m.HandleMessage(ctx, msg(step, "hello "+step)); err != nil {
						t.Fatal(err)
					}
					if n := lookups.Load() - before; n != 1 {
						t.Errorf("message %s: %d route lookups, want 1", step, n)
					}
					handed++
				}
			}
			f.settle()
			for id, key := range tc.want {
				if got := holders(f, id, acpKey, subKey, keyOf("t1")); !slices.Equal(got, []string{key}) {
					t.Errorf("message %s is held by %v, want [%s]", id, got, key)
				}
			}
			if got := ext.taken(); !slices.Equal(got, tc.agent) {
				t.Errorf("the agent took %v, want %v", got, tc.agent)
			}
			for _, r := range ext.rec {
				if r.ID != acp.ID {
					t.Errorf("the agent was handed binding %s, want the resolved %s", r.ID, acp.ID)
				}
			}
		})
	}
}

// TestOwedTurnResumesWhereItsMessageWasTaken: the previous process took a
// thread's message (its user entry is in the thread's own session) and
// died before answering; a /focus then moved the thread onto a subagent's
// session. Resume answers the owed turn once, in the session that took the
// message: the message is in one transcript. On the old code Resume routed
// the owed message afresh and wrote it into the subagent's session too.
func TestOwedTurnResumesWhereItsMessageWasTaken(t *testing.T) {
	const subKey = "agent:main:subagent:moved"
	ctx := context.Background()
	st := memory.New()
	reg := memory.NewSessions()
	owed := session.Message{Conversation: threadRef("t1", "c1"), MessageID: "401", AuthorID: "u1", AuthorName: "alice", Text: "are you there?"}
	now := time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC)
	if err := reg.PutSessionInfo(ctx, session.Info{Key: keyOf("t1"), AgentID: "main", Kind: session.KindMain, Requester: threadRef("t1", "c1"),
		Status: session.StatusIdle, CreatedAt: now, Pending: []session.PendingTurn{{Message: owed}}}); err != nil {
		t.Fatal(err)
	}
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st})
	if _, err := tr.Append(ctx, keyOf("t1"), transcript.Entry{Role: transcript.RoleUser, Author: "alice", Text: owed.Text,
		MessageIDs: []string{"401"}, Source: transcript.SourceUser, DeliveryID: "in:401"}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOptions{store: st, registry: reg})
	focus(t, f, subKey, "t1")
	if turns, _ := f.m.Resume(ctx); turns != 1 {
		t.Fatalf("Resume resumed %d turns, want 1", turns)
	}
	f.settle()
	if got := holders(f, "401", keyOf("t1"), subKey); !slices.Equal(got, []string{keyOf("t1")}) {
		t.Errorf("message 401 is held by %v, want only the session that took it", got)
	}
	if n := len(f.sender.to("t1")); n != 1 {
		t.Errorf("t1 got %d messages, want the owed answer once", n)
	}
	for _, in := range f.m.Sessions(nil) {
		if len(in.Pending) != 0 {
			t.Errorf("%s still owes %d turns", in.Key, len(in.Pending))
		}
	}
}
